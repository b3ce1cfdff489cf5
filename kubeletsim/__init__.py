"""kubeletsim package (work in progress; see the issues)."""
