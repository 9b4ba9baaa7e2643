"""A small, readable, correct bucketed data-parallel gradient synchronizer.

``reference.layout`` plans buffers without allocating; ``reference.buffer``
allocates them and hands out views.
"""

__version__ = "0.1.0"
