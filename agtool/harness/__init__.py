"""The harness: Hypothesis properties of a contract table, and of an MCP server from outside."""
