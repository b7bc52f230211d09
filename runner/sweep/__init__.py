"""The sweep of speculation settings over a pair, its crash diagnosis and its report."""
