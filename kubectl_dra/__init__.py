"""``kubectl dra``: a kubectl plugin and a web dashboard for the cluster's devices, claims and waiting pods."""
