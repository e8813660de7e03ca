"""The TubeMQ master's side of the lab: client-balance groups and the partition metadata clients query."""
