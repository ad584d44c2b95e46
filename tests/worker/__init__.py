"""The worker machinery on its own: the jail, the wire between judge and worker, what a worker may import."""
