"""One run, from the model's stream to its result: the Host, the streamed run, sessions, the seal."""
