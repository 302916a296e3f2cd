#!/usr/bin/python3
"""Peer of bench/python_hub.py: datasets stored the way TensorLayer's TensorHub stored them.

TensorHub (tensorlayer/db.py) saved a dataset as ``pickle.dumps(dataset,
protocol=pickle.HIGHEST_PROTOCOL)`` put into MongoDB's GridFS, with a document of its tags, and
found it again with ``find_one(filter, sort)`` then ``pickle.loads`` of the GridFS file. Here
the pickle goes into one BLOB column of one row, with Python's sqlite3 module (SQLite) or with
psycopg2 into a bytea column (PostgreSQL), and the newest row of the dataset's name is read
back and unpickled. No hash is computed or checked (TensorHub checked none).

SQLite runs with the pragmas tensorhub's own store uses (WAL, synchronous=NORMAL), so both
sides pay the same durability cost. Used as a module: ``PickleHub(uri, project_name)`` with
``save_dataset(dataset, dataset_name, **tags)`` and ``find_top_dataset(dataset_name)``; uri is
``sqlite:///abs/path.db`` or ``postgresql://user@host:port/db``. Runs with Debian's
/usr/bin/python3 and python3-psycopg2.
"""
import json
import pickle
import sqlite3
import time


class PickleHub:
    """One connection to a hub of pickled datasets (SQLite file or PostgreSQL database); the
    table is created where missing."""

    def __init__(self, uri, project_name):
        self.project_name = project_name
        if uri.startswith("sqlite://"):
            self.kind = "sqlite"
            self.conn = sqlite3.connect(uri[len("sqlite://"):])
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("CREATE TABLE IF NOT EXISTS datasets (id INTEGER PRIMARY KEY, project_name TEXT, "
                              "dataset_name TEXT, time REAL, tags TEXT, data BLOB)")
            self.conn.commit()
            self.param = "?"
        else:
            import psycopg2  # only where PostgreSQL is measured
            self.kind = "postgresql"
            self.conn = psycopg2.connect(uri)
            with self.conn.cursor() as cur:
                cur.execute("CREATE TABLE IF NOT EXISTS datasets (id BIGSERIAL PRIMARY KEY, project_name TEXT, "
                            "dataset_name TEXT, time DOUBLE PRECISION, tags JSONB, data BYTEA)")
            self.conn.commit()
            self.param = "%s"

    def save_dataset(self, dataset, dataset_name, **tags):
        """Pickles `dataset` (any picklable value) into one row; returns the row's id."""
        blob = pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL)
        p = self.param
        sql = (f"INSERT INTO datasets (project_name, dataset_name, time, tags, data) "
               f"VALUES ({p}, {p}, {p}, {p}, {p})")
        args = [self.project_name, dataset_name, time.time(), json.dumps(tags)]
        if self.kind == "sqlite":
            cur = self.conn.execute(sql, args + [blob])
            row_id = cur.lastrowid
        else:
            import psycopg2
            with self.conn.cursor() as cur:
                cur.execute(sql + " RETURNING id", args + [psycopg2.Binary(blob)])
                row_id = cur.fetchone()[0]
        self.conn.commit()
        return row_id

    def find_top_dataset(self, dataset_name):
        """The newest dataset named `dataset_name`, unpickled; None when there is none."""
        p = self.param
        sql = (f"SELECT data FROM datasets WHERE project_name = {p} AND dataset_name = {p} "
               "ORDER BY time DESC, id DESC LIMIT 1")
        if self.kind == "sqlite":
            row = self.conn.execute(sql, (self.project_name, dataset_name)).fetchone()
        else:
            with self.conn.cursor() as cur:
                cur.execute(sql, (self.project_name, dataset_name))
                row = cur.fetchone()
            self.conn.commit()
        return None if row is None else pickle.loads(row[0])

    def close(self):
        """Closes the connection."""
        self.conn.close()
