"""The PostgreSQL store's schema: each version's migration, applied once under an advisory lock.

The schema's version is kept in `agui_schema_version`; replicas starting together on an empty database
migrate it once, and the others wait for it.
"""

from __future__ import annotations

from typing import Any, Final

_MIGRATION_LOCK: Final = 0x61677569  # "agui": the advisory lock every replica takes around the migration
SCHEMA_VERSION: Final = 9

# Version 1 of the schema: a thread's head, its messages one row each, and the save as one function so
# that the compare-and-set, the fence check and every write are one statement: one round trip.
MIGRATIONS: Final[dict[int, str]] = {
    1: """
    CREATE TABLE agui_threads (
        thread_id     text PRIMARY KEY,
        version       bigint NOT NULL,
        claim         bigint NOT NULL,
        message_count integer NOT NULL,
        open_turn     text NOT NULL DEFAULT 'null',
        applied       text NOT NULL DEFAULT 'null',
        queued        text NOT NULL DEFAULT 'null',
        saved_at      timestamptz NOT NULL DEFAULT now(),
        expires_at    timestamptz
    );
    CREATE INDEX agui_threads_saved ON agui_threads (saved_at);
    CREATE INDEX agui_threads_expiry ON agui_threads (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE agui_messages (
        thread_id  text NOT NULL,
        position   integer NOT NULL,
        message_id text NOT NULL,
        role       text NOT NULL,
        body       text NOT NULL,
        PRIMARY KEY (thread_id, position)
    );
    CREATE FUNCTION agui_save(
        p_thread text, p_expected bigint, p_fence bigint, p_claim boolean, p_keep integer,
        p_replace_at integer[], p_replace_id text[], p_replace_role text[], p_replace_body text[],
        p_append_id text[], p_append_role text[], p_append_body text[],
        p_set_open boolean, p_open text, p_set_applied boolean, p_applied text,
        p_set_queued boolean, p_queued text, p_expires timestamptz
    ) RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
        v_version bigint := 0;
        v_claim bigint := 0;
        v_count integer := 0;
        v_kept integer;
        v_found boolean;
    BEGIN
        SELECT version, claim, message_count INTO v_version, v_claim, v_count
            FROM agui_threads WHERE thread_id = p_thread FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
            v_version := 0; v_claim := 0; v_count := 0;
        END IF;
        IF p_fence IS NOT NULL AND v_claim <> p_fence THEN
            RAISE EXCEPTION 'stale claim' USING ERRCODE = 'AG001';
        END IF;
        IF v_version <> p_expected THEN
            RAISE EXCEPTION 'conflict' USING ERRCODE = 'AG002';
        END IF;
        v_kept := coalesce(p_keep, v_count);
        IF v_kept < 0 OR v_kept > v_count
           OR EXISTS (SELECT 1 FROM unnest(p_replace_at) AS r(at) WHERE r.at < 0 OR r.at >= v_kept) THEN
            RAISE EXCEPTION 'position' USING ERRCODE = 'AG003';
        END IF;
        IF p_keep IS NOT NULL AND p_keep < v_count THEN
            DELETE FROM agui_messages WHERE thread_id = p_thread AND position >= p_keep;
        END IF;
        IF cardinality(p_replace_at) > 0 THEN
            UPDATE agui_messages m SET message_id = r.id, role = r.role, body = r.body
                FROM unnest(p_replace_at, p_replace_id, p_replace_role, p_replace_body) AS r(at, id, role, body)
                WHERE m.thread_id = p_thread AND m.position = r.at;
        END IF;
        IF cardinality(p_append_id) > 0 THEN
            INSERT INTO agui_messages (thread_id, position, message_id, role, body)
                SELECT p_thread, v_kept + a.n - 1, a.id, a.role, a.body
                FROM unnest(p_append_id, p_append_role, p_append_body) WITH ORDINALITY AS a(id, role, body, n);
        END IF;
        v_count := v_kept + cardinality(p_append_id);
        IF v_found THEN
            UPDATE agui_threads SET
                version = v_version + 1,
                claim = v_claim + p_claim::integer,
                message_count = v_count,
                open_turn = CASE WHEN p_set_open THEN p_open ELSE open_turn END,
                applied = CASE WHEN p_set_applied THEN p_applied ELSE applied END,
                queued = CASE WHEN p_set_queued THEN p_queued ELSE queued END,
                expires_at = CASE WHEN p_set_open THEN p_expires ELSE expires_at END,
                saved_at = now()
            WHERE thread_id = p_thread;
        ELSE
            -- A racing creator that committed first makes this a unique violation: a conflict.
            INSERT INTO agui_threads
                (thread_id, version, claim, message_count, open_turn, applied, queued, expires_at)
            VALUES (p_thread, 1, p_claim::integer, v_count,
                    CASE WHEN p_set_open THEN p_open ELSE 'null' END,
                    CASE WHEN p_set_applied THEN p_applied ELSE 'null' END,
                    CASE WHEN p_set_queued THEN p_queued ELSE 'null' END,
                    p_expires);
        END IF;
        RETURN v_version + 1;
    END $$;
    """,
    # Version 2: who owns each thread, set once by the save that creates it (threads from before stay unowned).
    2: """
    ALTER TABLE agui_threads ADD COLUMN owner text;
    """,
    # Version 3: a message's position by its id (`find_message`), from the index alone.
    3: """
    CREATE INDEX agui_messages_id ON agui_messages (thread_id, message_id, position);
    """,
    # Version 4 (issue 31): threads as a listed resource, with a title; the runs' journals. A thread's
    # `updated_at` is its `saved_at` (every save sets it, to the microsecond): the listing's index orders by
    # it, and by the id's bytes (COLLATE "C": the same order in every database, and as Python compares str).
    # An append and a delete are one function each, so one statement and one round trip. A journal's events are
    # one row per append (`_protocol.pack_events`: the seqs `first_seq..last_seq`, their JSON one line each),
    # keyed by the last seq, so a read from `after` is a range of the key. Version 4 is not released yet, so it
    # was changed in place when it went from one row per event to one per append (issue 31): a database migrated
    # on main before that keeps the old `agui_journal_events` and `agui_append`; make its schema again.
    4: """
    ALTER TABLE agui_threads ADD COLUMN title text;
    CREATE INDEX agui_threads_listing ON agui_threads (owner, saved_at DESC, (thread_id COLLATE "C") DESC);
    CREATE TABLE agui_journals (
        thread_id      text NOT NULL,
        run_id         text NOT NULL,
        last_seq       integer NOT NULL DEFAULT 0,
        ended          boolean NOT NULL DEFAULT false,
        stop_requested boolean NOT NULL DEFAULT false,
        appended_at    timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (thread_id, run_id)
    );
    CREATE INDEX agui_journals_appended ON agui_journals (appended_at);
    CREATE TABLE agui_journal_events (
        thread_id text NOT NULL,
        run_id    text NOT NULL,
        first_seq integer NOT NULL,
        last_seq  integer NOT NULL,
        body      text NOT NULL,
        PRIMARY KEY (thread_id, run_id, last_seq)
    );
    CREATE FUNCTION agui_append(
        p_thread text, p_run text, p_first bigint, p_count integer, p_body text, p_ended boolean
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
        v_last integer;
        v_ended boolean;
        v_stop boolean;
    BEGIN
        -- A racing first append waits here for the other's commit, then finds its row.
        INSERT INTO agui_journals (thread_id, run_id) VALUES (p_thread, p_run) ON CONFLICT DO NOTHING;
        SELECT last_seq, ended, stop_requested INTO v_last, v_ended, v_stop
            FROM agui_journals WHERE thread_id = p_thread AND run_id = p_run FOR UPDATE;
        IF v_ended THEN
            RAISE EXCEPTION 'ended' USING ERRCODE = 'AG004';
        END IF;
        IF p_first IS NOT NULL AND p_first <> v_last + 1 THEN
            RAISE EXCEPTION '%', v_last USING ERRCODE = 'AG005';
        END IF;
        IF p_count > 0 THEN
            INSERT INTO agui_journal_events (thread_id, run_id, first_seq, last_seq, body)
                VALUES (p_thread, p_run, v_last + 1, v_last + p_count, p_body);
        END IF;
        UPDATE agui_journals
            SET last_seq = v_last + p_count, ended = p_ended, appended_at = now()
            WHERE thread_id = p_thread AND run_id = p_run;
        RETURN v_stop;
    END $$;
    CREATE FUNCTION agui_delete(p_thread text) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        -- Each statement sees what committed before it: the journals' rows go first (waiting for an append
        -- in flight), then their events; the head row is locked before the messages go, as a save locks it
        -- before it writes, so no save lands between the two.
        DELETE FROM agui_journals WHERE thread_id = p_thread;
        DELETE FROM agui_journal_events WHERE thread_id = p_thread;
        PERFORM 1 FROM agui_threads WHERE thread_id = p_thread FOR UPDATE;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        DELETE FROM agui_messages WHERE thread_id = p_thread;
        DELETE FROM agui_threads WHERE thread_id = p_thread;
        RETURN true;
    END $$;
    """,
    # Version 5 (issue 32): a name for each creation of a thread, set once by the save that creates it, so that a
    # thread deleted and created again under the same id is told apart (`ThreadHead.incarnation`).
    5: """
    ALTER TABLE agui_threads ADD COLUMN incarnation text;
    """,
    # Version 6 (issue 40): a save names the life of the thread it is meant for, refused for another one (a thread
    # deleted and created again under its id), and draws the head a fresh stamp (`ThreadHead.stamp`). The save of
    # version 1 stays beside it, for a replica not yet upgraded.
    6: """
    ALTER TABLE agui_threads ADD COLUMN stamp text;
    CREATE FUNCTION agui_save(
        p_thread text, p_expected bigint, p_fence bigint, p_claim boolean, p_keep integer,
        p_replace_at integer[], p_replace_id text[], p_replace_role text[], p_replace_body text[],
        p_append_id text[], p_append_role text[], p_append_body text[],
        p_set_open boolean, p_open text, p_set_applied boolean, p_applied text,
        p_set_queued boolean, p_queued text, p_expires timestamptz,
        p_life_check boolean, p_life text, p_stamp text
    ) RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
        v_version bigint := 0;
        v_claim bigint := 0;
        v_count integer := 0;
        v_kept integer;
        v_found boolean;
        v_life text;
    BEGIN
        SELECT version, claim, message_count, incarnation INTO v_version, v_claim, v_count, v_life
            FROM agui_threads WHERE thread_id = p_thread FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
            v_version := 0; v_claim := 0; v_count := 0;
        END IF;
        -- A save meant for another life of the thread (deleted, perhaps created again) is refused first.
        IF p_life_check AND p_expected <> 0 AND (NOT v_found OR v_life IS DISTINCT FROM p_life) THEN
            RAISE EXCEPTION 'thread gone' USING ERRCODE = 'AG006';
        END IF;
        IF p_fence IS NOT NULL AND v_claim <> p_fence THEN
            RAISE EXCEPTION 'stale claim' USING ERRCODE = 'AG001';
        END IF;
        IF v_version <> p_expected THEN
            RAISE EXCEPTION 'conflict' USING ERRCODE = 'AG002';
        END IF;
        v_kept := coalesce(p_keep, v_count);
        IF v_kept < 0 OR v_kept > v_count
           OR EXISTS (SELECT 1 FROM unnest(p_replace_at) AS r(at) WHERE r.at < 0 OR r.at >= v_kept) THEN
            RAISE EXCEPTION 'position' USING ERRCODE = 'AG003';
        END IF;
        IF p_keep IS NOT NULL AND p_keep < v_count THEN
            DELETE FROM agui_messages WHERE thread_id = p_thread AND position >= p_keep;
        END IF;
        IF cardinality(p_replace_at) > 0 THEN
            UPDATE agui_messages m SET message_id = r.id, role = r.role, body = r.body
                FROM unnest(p_replace_at, p_replace_id, p_replace_role, p_replace_body) AS r(at, id, role, body)
                WHERE m.thread_id = p_thread AND m.position = r.at;
        END IF;
        IF cardinality(p_append_id) > 0 THEN
            INSERT INTO agui_messages (thread_id, position, message_id, role, body)
                SELECT p_thread, v_kept + a.n - 1, a.id, a.role, a.body
                FROM unnest(p_append_id, p_append_role, p_append_body) WITH ORDINALITY AS a(id, role, body, n);
        END IF;
        v_count := v_kept + cardinality(p_append_id);
        IF v_found THEN
            UPDATE agui_threads SET
                version = v_version + 1,
                claim = v_claim + p_claim::integer,
                message_count = v_count,
                open_turn = CASE WHEN p_set_open THEN p_open ELSE open_turn END,
                applied = CASE WHEN p_set_applied THEN p_applied ELSE applied END,
                queued = CASE WHEN p_set_queued THEN p_queued ELSE queued END,
                expires_at = CASE WHEN p_set_open THEN p_expires ELSE expires_at END,
                saved_at = now(),
                stamp = p_stamp
            WHERE thread_id = p_thread;
        ELSE
            -- A racing creator that committed first makes this a unique violation: a conflict.
            INSERT INTO agui_threads
                (thread_id, version, claim, message_count, open_turn, applied, queued, expires_at, stamp)
            VALUES (p_thread, 1, p_claim::integer, v_count,
                    CASE WHEN p_set_open THEN p_open ELSE 'null' END,
                    CASE WHEN p_set_applied THEN p_applied ELSE 'null' END,
                    CASE WHEN p_set_queued THEN p_queued ELSE 'null' END,
                    p_expires, p_stamp);
        END IF;
        RETURN v_version + 1;
    END $$;
    CREATE FUNCTION agui_delete(p_thread text, p_life_check boolean, p_life text) RETURNS boolean
    LANGUAGE plpgsql AS $$
    DECLARE
        v_found boolean;
        v_life text;
    BEGIN
        -- The head row is locked first (no append locks it, so no cycle): a delete meant for one life of the
        -- thread leaves another whole, journals included.
        SELECT incarnation INTO v_life FROM agui_threads WHERE thread_id = p_thread FOR UPDATE;
        v_found := FOUND;
        IF v_found AND p_life_check AND v_life IS DISTINCT FROM p_life THEN
            RETURN false;
        END IF;
        DELETE FROM agui_journals WHERE thread_id = p_thread;
        DELETE FROM agui_journal_events WHERE thread_id = p_thread;
        IF NOT v_found THEN
            RETURN false;
        END IF;
        DELETE FROM agui_messages WHERE thread_id = p_thread;
        DELETE FROM agui_threads WHERE thread_id = p_thread;
        RETURN true;
    END $$;
    """,
    # Version 7 (issue 42): the tools a person allowed for the rest of a thread, a head record like the others. A save
    # that changes them sets the column in the save's transaction (`PostgresStore.save`): `agui_save` is unchanged.
    7: """
    ALTER TABLE agui_threads ADD COLUMN grants text NOT NULL DEFAULT 'null';
    """,
    # Version 8 (issue 43): an append that adds events or ends the journal notifies the journal's channel
    # (`_postgres_notify.channel`: 'agui_' and the MD5 of the thread and run ids joined by U+001F) with its last
    # seq, in its transaction: the replicas that follow the run read what is new then, instead of polling. Same
    # signature and checks as version 4's, so a replica not yet upgraded appends through it alike.
    8: """
    CREATE OR REPLACE FUNCTION agui_append(
        p_thread text, p_run text, p_first bigint, p_count integer, p_body text, p_ended boolean
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    DECLARE
        v_last integer;
        v_ended boolean;
        v_stop boolean;
    BEGIN
        -- A racing first append waits here for the other's commit, then finds its row.
        INSERT INTO agui_journals (thread_id, run_id) VALUES (p_thread, p_run) ON CONFLICT DO NOTHING;
        SELECT last_seq, ended, stop_requested INTO v_last, v_ended, v_stop
            FROM agui_journals WHERE thread_id = p_thread AND run_id = p_run FOR UPDATE;
        IF v_ended THEN
            RAISE EXCEPTION 'ended' USING ERRCODE = 'AG004';
        END IF;
        IF p_first IS NOT NULL AND p_first <> v_last + 1 THEN
            RAISE EXCEPTION '%', v_last USING ERRCODE = 'AG005';
        END IF;
        IF p_count > 0 THEN
            INSERT INTO agui_journal_events (thread_id, run_id, first_seq, last_seq, body)
                VALUES (p_thread, p_run, v_last + 1, v_last + p_count, p_body);
        END IF;
        UPDATE agui_journals
            SET last_seq = v_last + p_count, ended = p_ended, appended_at = now()
            WHERE thread_id = p_thread AND run_id = p_run;
        IF p_count > 0 OR p_ended THEN
            PERFORM pg_notify('agui_' || md5(p_thread || chr(31) || p_run), (v_last + p_count)::text);
        END IF;
        RETURN v_stop;
    END $$;
    """,
    # Version 9 (issue 43): a save and a journal append in one statement (`PostgresStore.save_and_append`): a run's
    # first save carries its RUN_STARTED, its last its journal's last events; and what a save sets beside
    # `agui_save` (a created thread's owner and incarnation, a title, grants) in the same statement. It calls the
    # functions of versions 6 and 8, which stay as they are for a replica not yet upgraded.
    9: """
    CREATE FUNCTION agui_save_append(
        p_thread text, p_expected bigint, p_fence bigint, p_claim boolean, p_keep integer,
        p_replace_at integer[], p_replace_id text[], p_replace_role text[], p_replace_body text[],
        p_append_id text[], p_append_role text[], p_append_body text[],
        p_set_open boolean, p_open text, p_set_applied boolean, p_applied text,
        p_set_queued boolean, p_queued text, p_expires timestamptz,
        p_life_check boolean, p_life text, p_stamp text,
        p_created boolean, p_owner text, p_new_life text,
        p_set_title boolean, p_title text, p_set_grants boolean, p_grants text,
        p_run text, p_first bigint, p_count integer, p_body text, p_ended boolean,
        OUT o_version bigint, OUT o_stop boolean
    ) LANGUAGE plpgsql AS $$
    BEGIN
        -- The head row first, then the journal's: the order `agui_delete` and the purge lock them in.
        o_version := agui_save(
            p_thread, p_expected, p_fence, p_claim, p_keep,
            p_replace_at, p_replace_id, p_replace_role, p_replace_body,
            p_append_id, p_append_role, p_append_body,
            p_set_open, p_open, p_set_applied, p_applied, p_set_queued, p_queued, p_expires,
            p_life_check, p_life, p_stamp);
        IF p_created THEN
            UPDATE agui_threads SET owner = p_owner, incarnation = p_new_life WHERE thread_id = p_thread;
        END IF;
        IF p_set_title THEN
            UPDATE agui_threads SET title = p_title WHERE thread_id = p_thread;
        END IF;
        IF p_set_grants THEN
            UPDATE agui_threads SET grants = p_grants WHERE thread_id = p_thread;
        END IF;
        o_stop := agui_append(p_thread, p_run, p_first, p_count, p_body, p_ended);
    END $$;
    """,
}


async def migrate(connection: Any, timeout: float) -> None:
    """Bring the schema to `SCHEMA_VERSION`, once, however many replicas start together.

    A schema already there is only read (a read-only database can still be read). Each statement of a
    migration may take `timeout` seconds (the connection's own `statement_timeout` is a call's deadline).
    """
    if await _version(connection) == SCHEMA_VERSION:
        return
    async with connection.transaction():
        await connection.execute("SELECT set_config('statement_timeout', %s, true)", (f"{round(timeout * 1000)}ms",))
        # Transaction-level: released at commit, even if this process dies mid-way.
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await connection.execute("CREATE TABLE IF NOT EXISTS agui_schema_version (version integer NOT NULL)")
        cursor = await connection.execute("SELECT max(version) FROM agui_schema_version")
        row = await cursor.fetchone()
        current = row[0] if row and row[0] is not None else 0
        if current > SCHEMA_VERSION:
            raise RuntimeError(f"the database's agui schema is version {current}, newer than this adapter's")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            await connection.execute(MIGRATIONS[version])
            await connection.execute("INSERT INTO agui_schema_version (version) VALUES (%s)", (version,))


async def _version(connection: Any) -> int | None:
    """The schema's version, read without a lock or a write; None before the first migration."""
    cursor = await connection.execute("SELECT to_regclass('agui_schema_version') IS NOT NULL")
    row = await cursor.fetchone()
    if not row or not row[0]:
        return None
    cursor = await connection.execute("SELECT max(version) FROM agui_schema_version")
    row = await cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None
