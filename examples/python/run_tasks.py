"""The runner of TensorLayer TensorHub's examples/database, over tensorhub.

Claims the tasks dispatch_tasks.py queued, one at a time, and runs each to its end with
run_top_task (the C++ runner underneath: a lease, heartbeats, the task in its own process, its
script under this interpreter), until none is pending, or with --forever until Ctrl-C (which
gives a running task back to the queue). Start as many as you like, on any machine that
reaches the hub; `tensorhub runner --project tutorial --task-name mnist` does the same job.

    /usr/bin/python3 examples/python/run_tasks.py [--hub URI] [--forever]
"""

import argparse
import os
import sys
import time

import tensorhub


def parse_args(argv=None):
    """The command line (see --help)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hub", help="hub URI (default: $TENSORHUB_URI, else sqlite://<cwd>/tensorhub.db)")
    p.add_argument("--project", default=os.environ.get("TENSORHUB_PROJECT") or "tutorial",
                   help="project (default: $TENSORHUB_PROJECT, else tutorial)")
    p.add_argument("--task-name", default="mnist", help="run only tasks of this name (default: %(default)s)")
    p.add_argument("--forever", action="store_true", help="keep waiting for new tasks instead of exiting")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between looks at an empty queue with "
                                                           "--forever (default: %(default)s)")
    p.add_argument("--python", help="interpreter of script tasks that name none (default: this one)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    db = tensorhub.TensorHub(args.hub, args.project)
    ran = 0
    waiting = False
    try:
        while True:
            if db.run_top_task(args.task_name, python=args.python):
                ran += 1
                waiting = False
                print(f"ran task {ran}", flush=True)
            elif not args.forever:
                break
            else:
                if not waiting:
                    print(f"waiting for tasks {args.task_name!r} of project {db.project_name}", flush=True)
                    waiting = True
                time.sleep(args.poll)
    except KeyboardInterrupt:
        print(f"interrupted after {ran} task(s); a running one went back to the queue", flush=True)
        return 130
    print(f"no pending task {args.task_name!r} left: ran {ran}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tensorhub.Error as e:  # e.g. a hub that cannot be reached: one line, no traceback
        sys.exit(f"run_tasks.py: {e}")
