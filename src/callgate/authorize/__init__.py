"""Stage ``authorize``: may this principal cause this effect, with values from where they came from?

`policy` holds the rules and their decision, `policy_file` reads them from a
file, `provenance` checks that sink arguments come from trusted sources
(`text` is how it reads text), and `intent` narrows a run to what the trusted
request needs once it has read untrusted content.
"""

from callgate.authorize.intent import Intent, IntentFinding
from callgate.authorize.provenance import SinkFinding, TrustIndex, TrustPath

__all__ = ["Intent", "IntentFinding", "SinkFinding", "TrustIndex", "TrustPath"]
