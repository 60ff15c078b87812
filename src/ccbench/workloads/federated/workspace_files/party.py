"""Start one party of an OpenFL federation (aggregator or collaborator) with ccbench's timing hooks.

Run by OpenFL's environment in the workspace directory, as ``fx aggregator start`` /
``fx collaborator start`` would (same Plan API: ``Plan.parse`` then ``get_server().serve()`` or
``get_collaborator(name).run()``), with two additions that write timestamped events, one JSON
object a line, to ``--events``:

* OpenFL callbacks (round and task begin/end on collaborators, round end with the validation
  metrics on the aggregator);
* a wrapper around the gRPC stub the collaborator talks to the aggregator through: each call's
  start and end time and the serialized bytes sent and received (protobuf sizes), so
  communication time is measured at the call, not inferred from the round time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

_lock = threading.Lock()
_events = None
_state = {"round": None, "party": None}


def emit(event: str, **fields) -> None:
    fields.update(ev=event, t=time.time())
    line = json.dumps(fields, default=float)
    with _lock:
        _events.write(line + "\n")
        _events.flush()


def _timed_stub_class(base):
    class TimedAggregatorStub:
        """The generated AggregatorStub with each RPC timed and its payload bytes counted."""

        def __init__(self, channel):
            self._stub = base(channel)

        def _unary(self, method):
            call = getattr(self._stub, method)

            def wrapper(request, *args, **kwargs):
                start = time.time()
                response = call(request, *args, **kwargs)
                end = time.time()
                rnd = getattr(request, "round_number", None) if method == "GetAggregatedTensor" else None
                if method == "GetTasks" and getattr(response, "tasks", None):
                    _state["round"] = int(response.round_number)
                    rnd = _state["round"]
                emit(
                    "rpc",
                    party=_state["party"],
                    method=method,
                    start=start,
                    end=end,
                    sent=request.ByteSize(),
                    recv=response.ByteSize(),
                    round=rnd if rnd is not None else _state["round"],
                    idle=method == "GetTasks" and not getattr(response, "tasks", None),
                )
                return response

            return wrapper

        def __getattr__(self, name):
            if name == "SendLocalTaskResults":
                call = self._stub.SendLocalTaskResults

                def stream_wrapper(request_iterator, *args, **kwargs):
                    sent = [0]

                    def counted():
                        for chunk in request_iterator:
                            sent[0] += chunk.ByteSize()
                            yield chunk

                    start = time.time()
                    response = call(counted(), *args, **kwargs)
                    end = time.time()
                    emit(
                        "rpc",
                        party=_state["party"],
                        method=name,
                        start=start,
                        end=end,
                        sent=sent[0],
                        recv=response.ByteSize(),
                        round=_state["round"],
                        idle=False,
                    )
                    return response

                return stream_wrapper
            if name[:1].isupper():
                return self._unary(name)
            return getattr(self._stub, name)

    return TimedAggregatorStub


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=["aggregator", "collaborator"])
    parser.add_argument("--name", help="the collaborator's certified common name")
    parser.add_argument("--events", required=True, help="file the timestamped events are appended to")
    parser.add_argument(
        "--connect",
        help="HOST:PORT a collaborator dials instead of the plan's aggregator address (its local secure-channel proxy)",
    )
    parser.add_argument(
        "--task-poll",
        type=int,
        default=None,
        help="seconds a collaborator waits before asking again when the aggregator has no task for "
        "it yet (whole seconds: a protobuf int32; OpenFL's fixed value is 10)",
    )
    args = parser.parse_args()

    global _events
    _events = open(args.events, "a", buffering=1)
    _state["party"] = args.name or args.role
    emit("process_start", role=args.role, name=args.name, pid=os.getpid())
    sys.path.insert(0, os.getcwd())  # the workspace's src/ package, as fx does

    import openfl.transport.grpc.aggregator_client as aggregator_client
    from openfl.callbacks import Callback
    from openfl.federated import Plan

    class Recorder(Callback):
        def __init__(self, who):
            super().__init__()
            self.who = who

        def on_round_begin(self, round_num, logs=None):
            emit("round_begin", party=self.who, round=int(round_num))

        def on_round_end(self, round_num, logs=None):
            values = {}
            for key, value in (logs or {}).items():
                try:
                    values[str(key)] = float(value)
                except (TypeError, ValueError):
                    pass
            emit("round_end", party=self.who, round=int(round_num), logs=values)

        def on_task_begin(self, task_name, round_num, logs=None):
            emit("task_begin", party=self.who, task=str(task_name), round=int(round_num))

        def on_task_end(self, task_name, round_num, logs=None):
            emit("task_end", party=self.who, task=str(task_name), round=int(round_num))

        def on_experiment_end(self, logs=None):
            emit("experiment_end", party=self.who)

    plan_path = Path("plan/plan.yaml").absolute()
    if args.role == "aggregator":
        plan = Plan.parse(plan_config_path=plan_path, cols_config_path=Path("plan/cols.yaml").absolute())
        if args.task_poll is not None:
            from openfl.component.aggregator.aggregator import Aggregator

            poll = args.task_poll
            Aggregator._get_sleep_time = staticmethod(lambda: poll)
        server = plan.get_server()
        server.aggregator.callbacks.callbacks.append(Recorder("aggregator"))
        emit("serving")
        server.serve()
    else:
        aggregator_client.aggregator_pb2_grpc.AggregatorStub = _timed_stub_class(
            aggregator_client.aggregator_pb2_grpc.AggregatorStub
        )
        plan = Plan.parse(plan_config_path=plan_path, data_config_path=Path("plan/data.yaml").absolute())
        if args.connect:
            # after parsing: the federation's identity (the plan's hash) stays the aggregator's
            host, _, port = args.connect.rpartition(":")
            plan.config["network"]["settings"]["agg_addr"] = host
            plan.config["network"]["settings"]["agg_port"] = int(port)
        collaborator = plan.get_collaborator(args.name)
        collaborator.callbacks.callbacks.append(Recorder(args.name))
        emit("collaborator_ready", party=args.name)
        collaborator.run()
    emit("process_end", role=args.role, name=args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
