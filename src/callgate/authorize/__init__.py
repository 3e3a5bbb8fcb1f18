"""Stage ``authorize``: may this principal cause this effect, with values from where they came from?

`policy` holds the rules and their decision, `policy_file` reads them from a
file, and `provenance` checks that sink arguments come from trusted sources.
"""
