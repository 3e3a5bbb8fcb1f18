"""Harbor: a support assistant for a fictional outdoor shop, on callgate.

``shop``: the shop's data and its payment provider, in one SQLite file;
``tools``: the assistant's tools and their contracts; ``policy.toml``: what
needs a person; ``script``: the offline model's side of the conversation;
``demo``: the scenario, its transcript and its checks (``make demo``).
"""
