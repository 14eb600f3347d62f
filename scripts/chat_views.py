"""The chat lists of `scripts/bench-view-dispatch.sh` and `scripts/bench-view-restart.sh`: ITEMS conversations
of USERS owners (a tenth archived), and one view per owner showing that owner's conversations that are not
archived, newest first (a view with a gate: `ViewGate`)."""
import random


def conversations(users, items):
    """The owner of each conversation, and the conversations, the same for the same arguments: Python's global
    `random` is seeded here, and what a caller draws from it next is the same from run to run too."""
    random.seed(11)
    owners = [f"u{random.randrange(users)}" for _ in range(items)]
    return owners, [{"id": f"c{k}", "data": {"owner": owners[k], "at": k, "archived": random.random() < 0.1}}
                    for k in range(items)]


def inbox(user):
    """The definition of user number `user`'s view over the source `convs`."""
    return {"source": "convs", "sortBy": [{"field": "/at", "order": "desc"}],
            "filter": {"all": [{"field": "/owner", "eq": f"u{user}"}, {"field": "/archived", "ne": True}]}}
