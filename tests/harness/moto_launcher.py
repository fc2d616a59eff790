"""moto_server's own entry point, as the test harness runs it (tests/harness/moto.rs).

Four additions; the first three change nothing a request sent alone gets back:
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
  resource-id pattern is anchored, so it matches the one id exactly), from the same table;
- a test double of EC2's On-Demand Capacity Reservations, which moto 5.x does not have
  (`CapacityReservationsTestDouble`): CreateCapacityReservation (how a test seeds one) and
  DescribeCapacityReservations answered from a table kept on the region's EC2 backend (so moto's
  reset empties it), and an instant fleet whose launch template targets a reservation
  (`CapacityReservationSpecification.CapacityReservationTarget`, which moto's CreateFleet
  ignores) launched into it: the instance records the reservation (DescribeInstances shows its
  `capacityReservationId`), the reservation's `AvailableInstanceCount` is its total less its
  pending and running instances, and a launch into a full one fails as EC2's does
  (`ReservationCapacityExceeded`). Only what Dovetail asks for is modelled: `active` targeted or
  open reservations of type `default`, filtered by id, state, owner, match criteria, type, zone
  and tags.
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

from moto.core.responses import ActionResult  # noqa: E402
from moto.ec2.exceptions import EC2ClientError  # noqa: E402
from moto.ec2.models.fleets import Fleet  # noqa: E402
from moto.ec2.responses import EC2Response  # noqa: E402


class CapacityReservationsTestDouble:
    """The capacity reservations of one region's EC2 backend (a test double: see the module's
    docstring). Reservations are dicts in DescribeCapacityReservations' shape, less the counts,
    which are worked out from the instances launched into them when described."""

    LIVE = ("pending", "running")
    lock = threading.RLock()

    @staticmethod
    def of(backend):
        # On the backend object: moto's reset builds it again, and the table with it.
        return backend.__dict__.setdefault("dovetail_capacity_reservations", {})

    @classmethod
    def live_instances(cls, backend, reservation_id):
        return [
            i
            for i in backend.all_instances()
            if getattr(i, "capacity_reservation_id", None) == reservation_id and i._state.name in cls.LIVE
        ]

    @classmethod
    def described(cls, backend, r):
        live = len(cls.live_instances(backend, r["CapacityReservationId"]))
        return dict(r, AvailableInstanceCount=max(r["TotalInstanceCount"] - live, 0))

    @staticmethod
    def matches(r, filters):
        tags = {t["Key"]: t["Value"] for t in r["Tags"]}
        fields = {
            "state": r["State"],
            "owner-id": r["OwnerId"],
            "instance-match-criteria": r["InstanceMatchCriteria"],
            "instance-type": r["InstanceType"],
            "availability-zone": r["AvailabilityZone"],
        }
        for name, values in filters.items():
            if name.startswith("tag:"):
                if tags.get(name[4:]) not in values:
                    return False
            elif name == "tag-key":
                if not any(k in tags for k in values):
                    return False
            elif name in fields:
                if fields[name] not in values:
                    return False
            else:
                raise EC2ClientError("InvalidParameterValue", f"the test double cannot filter on {name}")
        return True

    @classmethod
    def target_of(cls, fleet, launch_spec):
        template = launch_spec.launch_template_spec or {}
        if "LaunchTemplateId" not in template:
            return None
        data = fleet.ec2_backend.get_launch_template(template["LaunchTemplateId"]).get_version(
            template.get("Version")
        ).data
        spec = data.get("CapacityReservationSpecification") or {}
        return (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")


def create_capacity_reservation(self):
    double = CapacityReservationsTestDouble
    with double.lock:
        table = double.of(self.ec2_backend)
        reservation_id = f"cr-{len(table) + 1:017x}"
        tags = self._parse_tag_specification().get("capacity-reservation", {})
        reservation = {
            "CapacityReservationId": reservation_id,
            "OwnerId": self.current_account,
            "CapacityReservationArn": f"arn:aws:ec2:{self.region}:{self.current_account}:capacity-reservation/{reservation_id}",
            "InstanceType": self._get_param("InstanceType"),
            "InstancePlatform": self._get_param("InstancePlatform"),
            "AvailabilityZone": self._get_param("AvailabilityZone"),
            "Tenancy": self._get_param("Tenancy") or "default",
            "TotalInstanceCount": int(self._get_param("InstanceCount")),
            "State": "active",
            "InstanceMatchCriteria": self._get_param("InstanceMatchCriteria") or "open",
            "ReservationType": "default",
            "EndDateType": "unlimited",
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        }
        table[reservation_id] = reservation
        return ActionResult({"CapacityReservation": double.described(self.ec2_backend, reservation)})


def describe_capacity_reservations(self):
    double = CapacityReservationsTestDouble
    with double.lock:
        table = double.of(self.ec2_backend)
        ids = self._get_param("CapacityReservationIds", [])
        for i in ids:
            if i not in table:
                raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{i}' does not exist")
        filters = self._filters_from_querystring()
        chosen = [r for r in table.values() if (not ids or r["CapacityReservationId"] in ids) and double.matches(r, filters)]
        return ActionResult({"CapacityReservations": [double.described(self.ec2_backend, r) for r in chosen]})


EC2Response.create_capacity_reservation = create_capacity_reservation
EC2Response.describe_capacity_reservations = describe_capacity_reservations

moto_create_on_demand_requests = Fleet.create_on_demand_requests


def create_on_demand_requests(self, weight_to_add):
    double = CapacityReservationsTestDouble
    with double.lock:
        table = double.of(self.ec2_backend)
        targets = {id(s): double.target_of(self, s) for s in self.launch_specs}
        for target in set(targets.values()) - {None}:
            reservation = table.get(target)
            if reservation is None:
                raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{target}' does not exist")
            if double.described(self.ec2_backend, reservation)["AvailableInstanceCount"] < 1:
                raise EC2ClientError("ReservationCapacityExceeded", f"There is no capacity left in {target}")
        before = len(self.on_demand_instances)
        moto_create_on_demand_requests(self, weight_to_add)
        for launched in self.on_demand_instances[before:]:
            launched["instance"].capacity_reservation_id = targets.get(id(launched["launch_spec"]))


Fleet.create_on_demand_requests = create_on_demand_requests

from moto.server import main  # noqa: E402

main(sys.argv[1:])
