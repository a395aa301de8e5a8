#!/usr/bin/env python3
"""tests/client/uuid_postgres_test.py — the uuid form as others read it.

Every uuid of client/forms-vectors.json (each layout's IDs, made by the C++ implementation and
checked by every client) is read by Python's uuid module and by a real PostgreSQL (Debian's,
started here on a Unix socket in a temporary directory, as the postgres user) into its `uuid`
type. Both must see an RFC 9562 version-7 UUID with the RFC variant, PostgreSQL must print it
back unchanged, and ordering by the uuid column must give the IDs in their numeric order (the
form sorts like the ID, within a layout).

Environment: FLURRY_FORMS_VECTORS. Needs root (to run PostgreSQL as postgres).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

VECTORS = os.environ["FLURRY_FORMS_VECTORS"]


def fail(message):
    print(f"uuid_postgres_test: {message}", file=sys.stderr)
    sys.exit(1)


def postgres_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        fail("PostgreSQL not found: apt-get install postgresql (scripts/setup does)")
    return os.path.dirname(found[-1])


def as_postgres(argv, **kwargs):
    return subprocess.run(["runuser", "-u", "postgres", "--"] + argv, check=True, capture_output=True,
                          text=True, **kwargs)


def main():
    if os.geteuid() != 0:
        fail("needs root to start PostgreSQL as the postgres user (scripts/test runs it as root)")
    with open(VECTORS) as handle:
        vectors = json.load(handle)
    layouts = [(layout["name"], [(int(entry["id"]), entry["uuid"]) for entry in layout["ids"]])
               for layout in vectors["layouts"]]
    total = sum(len(ids) for _, ids in layouts)
    if total < 10:
        fail(f"only {total} uuid vectors in {VECTORS}")

    for name, ids in layouts:
        for value, text in ids:
            parsed = uuid.UUID(text)
            if parsed.version != 7 or parsed.variant != uuid.RFC_4122 or str(parsed) != text:
                fail(f"{name}: ID {value}: Python reads {text} as version {parsed.version}, "
                     f"variant {parsed.variant}")

    bin_dir = postgres_bin()
    work = tempfile.mkdtemp(prefix="flurry-pg-")
    data = os.path.join(work, "data")
    started = False
    try:
        shutil.chown(work, "postgres")
        os.chmod(work, 0o700)
        as_postgres([os.path.join(bin_dir, "initdb"), "-D", data, "-A", "trust", "--no-sync", "-U", "postgres"])
        as_postgres([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-w", "-t", "60", "-l",
                     os.path.join(work, "log"), "-o", f"-k {work} -c listen_addresses='' -c fsync=off",
                     "start"])
        started = True
        rows = ",\n".join(f"('{name}', {value}::numeric, '{text}'::uuid, '{text}')"
                          for name, ids in layouts for value, text in ids)
        sql = f"""
create table forms (layout text, id numeric, u uuid, given text);
insert into forms values {rows};
select count(*) from forms;
select count(*) from forms where u::text <> given
   or substr(u::text, 15, 1) <> '7' or substr(u::text, 20, 1) not in ('8', '9', 'a', 'b');
select layout, string_agg(id::text, ',' order by u), string_agg(id::text, ',' order by id)
  from forms group by layout order by layout;
"""
        out = as_postgres([os.path.join(bin_dir, "psql"), "-h", work, "-d", "postgres", "-qAt",
                           "-v", "ON_ERROR_STOP=1", "-c", sql]).stdout.strip().split("\n")
        if int(out[0]) != total:
            fail(f"PostgreSQL stored {out[0]} of {total} uuids")
        if int(out[1]) != 0:
            fail(f"{out[1]} uuids printed back changed or not version 7 / RFC variant by PostgreSQL")
        for line in out[2:]:
            name, by_uuid, by_id = line.split("|")
            if by_uuid != by_id:
                fail(f"{name}: ordered by uuid {by_uuid}, by ID {by_id}")
        print(f"uuid_postgres_test: {total} uuids of {len(layouts)} layouts read as version 7 by Python "
              f"and PostgreSQL, ordered as their IDs")
    finally:
        if started:
            subprocess.run(["runuser", "-u", "postgres", "--", os.path.join(bin_dir, "pg_ctl"), "-D", data,
                            "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
