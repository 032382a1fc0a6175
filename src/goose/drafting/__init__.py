"""What drafters are made of: the contract every method implements (`contract`), tree parts and sources
(adjacency, context matching, SuffixDecoding's cache), and budget=auto with the cost surface it prunes against."""
