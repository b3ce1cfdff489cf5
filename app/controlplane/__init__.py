"""Loops the server runs besides serving requests, as upstream's control plane does (the
namespace lifecycle). They use the generic store like any request would."""
