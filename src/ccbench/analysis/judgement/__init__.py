"""What the rows mean: the verdict per layer, its semantics and headline, the lints of a comparison."""
