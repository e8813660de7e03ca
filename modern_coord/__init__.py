"""The coordinator-era consumer and group coordinator, after Kafka's classic protocol.

A broker-hosted coordinator owns membership and generations; one member
computes the assignment: DESIGN.md §3. Not built yet (issue 5).
"""
