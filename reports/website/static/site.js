// The site's one script, and all it adds to pages that read without it: a chart point's hover text shown at
// once (and on focus, for keyboards and phones), and a filter of the charts by name.
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function target(event) {
    return event.target.closest ? event.target.closest(".pt, .gap") : null;
  }
  function show(event) {
    var point = target(event);
    var title = point && point.querySelector("title");
    if (!tip || !title) return;
    tip.textContent = title.textContent;
    tip.hidden = false;
    var box = point.getBoundingClientRect();
    var width = document.documentElement.clientWidth;
    var left = Math.max(4, Math.min(box.left, width - tip.offsetWidth - 4));
    tip.style.left = window.scrollX + left + "px";
    tip.style.top = window.scrollY + box.bottom + 8 + "px";
  }
  function hide(event) {
    if (tip && target(event)) tip.hidden = true;
  }
  document.addEventListener("mouseover", show);
  document.addEventListener("focusin", show);
  document.addEventListener("mouseout", hide);
  document.addEventListener("focusout", hide);
  document.querySelectorAll("input.filter").forEach(function (input) {
    input.addEventListener("input", function () {
      var wanted = input.value.toLowerCase();
      document.querySelectorAll(".card[data-key]").forEach(function (card) {
        card.hidden = card.getAttribute("data-key").toLowerCase().indexOf(wanted) < 0;
      });
    });
  });
})();
