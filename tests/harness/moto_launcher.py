"""moto_server's own entry point, as the test harness runs it (tests/harness/moto.rs).

Three additions, none changing what a request sent alone gets back:
- a watchdog: the process exits when its stdin closes (the test process's end of a pipe), so a
  server never outlives the tests that started it;
- DynamoDB's operations one at a time. moto serves requests on threads and checks a write's
  condition apart from making the write, so two conditional writes sent at once could both pass
  (16 threads putting one key with `attribute_not_exists(pk)`, 200 times: once, two winners),
  where DynamoDB makes each check-and-write atomic. The exactly-once tests race invocations on
  purpose, and the provisioning lease is such a write;
- EC2 tags looked up by resource id. moto 5.2's TaggedEC2Resource.get_tags asks describe_tags for
  the resource, which walks every tag of the region: a DescribeInstances call is then quadratic in
  the instances (a 1,000-instance page took 62 s of 1,000 instances, 95 s of 5,000), which put the
  scale rig's 5,000-node size out of reach. The lookup below returns what that scan returns (its
  resource-id pattern is anchored, so it matches the one id exactly), from the same table.
"""

import functools
import inspect
import os
import sys
import threading

threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()

from moto.ec2.models.core import TaggedEC2Resource  # noqa: E402
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix  # noqa: E402


def get_tags(self):
    resource_id = getattr(self, "id", None)
    if not resource_id:
        return []
    # .get: the table is a defaultdict, and a lookup must not add an entry.
    tags = self.ec2_backend.tags.get(resource_id) or {}
    resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
    return [
        {"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
        for key, value in tags.items()
    ]


TaggedEC2Resource.get_tags = get_tags

from moto.dynamodb.models import DynamoDBBackend  # noqa: E402

# Reentrant: the backend's operations call each other (get_table, for one).
dynamodb_lock = threading.RLock()


def one_at_a_time(operation):
    @functools.wraps(operation)
    def locked(*args, **kwargs):
        with dynamodb_lock:
            return operation(*args, **kwargs)

    return locked


for name, member in list(vars(DynamoDBBackend).items()):
    if inspect.isfunction(member) and not name.startswith("_"):
        setattr(DynamoDBBackend, name, one_at_a_time(member))

from moto.server import main  # noqa: E402

main(sys.argv[1:])
