"""llama.cpp itself: building and installing it, its binaries, running its processes, reading their output."""
