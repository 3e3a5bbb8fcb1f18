"""Stage ``authorize``: may this principal cause this effect, with values from where they came from?

`policy` holds the rules and their decision, `policy_file` reads them from a
file, `provenance` checks that sink arguments come from trusted sources
(`text` is how it reads text), `intent` narrows a run to what the trusted
request needs once it has read untrusted content, `steps` lets an intent count
calls and bind arguments to sources, and `records` trusts the records the user
owns or designates.
"""

from callgate.authorize.intent import Intent, IntentFinding
from callgate.authorize.provenance import SinkFinding, TrustIndex, TrustPath
from callgate.authorize.records import Designated, Owned
from callgate.authorize.steps import Bind, PlanError, PlannedCall

__all__ = [
    "Bind",
    "Designated",
    "Intent",
    "IntentFinding",
    "Owned",
    "PlanError",
    "PlannedCall",
    "SinkFinding",
    "TrustIndex",
    "TrustPath",
]
