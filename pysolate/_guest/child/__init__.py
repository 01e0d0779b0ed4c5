"""What the Guest child process runs: standard library only, and nothing of the Host."""
