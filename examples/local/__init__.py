"""A real local model in the loop: the shop's tools, a task set, the demo and the evaluation."""
