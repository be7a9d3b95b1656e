-- Every write in one statement, so one round trip: a write on its own commits as it returns
-- (no BEGIN, no separate revision-counter statement, no COMMIT), and several writes still go
-- in one call. The revision counter's row lock is taken first, before the statement below it
-- reads anything: PL/pgSQL gives each statement of a volatile function a new snapshot, so what
-- follows sees every commit made before the lock was granted. A failure raises, which undoes
-- the whole statement (the counter too), so rvs stay gap-free. The codes carry the index of
-- the write that failed, and for a conflict the stored rv, in the message: "<index> <rv>".
--   KR404 not found (an update's object is gone), KR409 the precondition failed,
--   KR410 already exists (a create's key is taken).

-- Writes i = 1..n (a NULL uid: an update, conditional on precondition[i] unless NULL) with
-- rvs first..first+n-1, in order; returns the first. `relaxed`: the commit does not wait for
-- its WAL flush (synchronous_commit = off for this transaction only).
CREATE FUNCTION kairon_write(
    p_group text[], p_resource text[], p_namespace text[], p_name text[],
    p_uid uuid[], p_precondition bigint[], p_object jsonb[], p_relaxed boolean
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_rv bigint;
    v_first bigint;
    v_object jsonb;
    v_current bigint;
    v_event text;
BEGIN
    IF p_relaxed THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_name, 1), 0) LOOP
        UPDATE store_meta SET current_rv = current_rv + 1 RETURNING current_rv INTO v_rv;
        v_first := coalesce(v_first, v_rv);
        v_object := jsonb_set(p_object[i], '{metadata,resourceVersion}', to_jsonb(v_rv::text));
        IF p_uid[i] IS NOT NULL THEN
            INSERT INTO objects (api_group, resource, namespace, name, uid, resource_version, object)
            VALUES (p_group[i], p_resource[i], p_namespace[i], p_name[i], p_uid[i], v_rv, v_object)
            ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'KR410', MESSAGE = (i - 1)::text || ' 0';
            END IF;
            v_event := 'ADDED';
        ELSE
            UPDATE objects SET resource_version = v_rv, object = v_object, updated_at = now()
            WHERE api_group = p_group[i] AND resource = p_resource[i]
              AND namespace = p_namespace[i] AND name = p_name[i]
              AND (p_precondition[i] IS NULL OR resource_version = p_precondition[i]);
            IF NOT FOUND THEN
                SELECT resource_version INTO v_current FROM objects
                WHERE api_group = p_group[i] AND resource = p_resource[i]
                  AND namespace = p_namespace[i] AND name = p_name[i];
                IF v_current IS NULL THEN
                    RAISE EXCEPTION USING ERRCODE = 'KR404', MESSAGE = (i - 1)::text || ' 0';
                END IF;
                RAISE EXCEPTION USING ERRCODE = 'KR409', MESSAGE = (i - 1)::text || ' ' || v_current::text;
            END IF;
            v_event := 'MODIFIED';
        END IF;
        INSERT INTO revisions (rv, api_group, resource, namespace, name, event_type, object)
        VALUES (v_rv, p_group[i], p_resource[i], p_namespace[i], p_name[i], v_event, v_object);
        PERFORM pg_notify('kairon_revisions', v_rv::text);
    END LOOP;
    RETURN v_first;
END
$$;

-- Removes one object (conditional on its rv unless NULL) and logs the deletion; returns the
-- object as the DELETED event carries it (with the deletion's rv).
CREATE FUNCTION kairon_delete(
    p_group text, p_resource text, p_namespace text, p_name text, p_precondition bigint
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_rv bigint;
    v_object jsonb;
    v_current bigint;
BEGIN
    UPDATE store_meta SET current_rv = current_rv + 1 RETURNING current_rv INTO v_rv;
    DELETE FROM objects
    WHERE api_group = p_group AND resource = p_resource AND namespace = p_namespace AND name = p_name
      AND (p_precondition IS NULL OR resource_version = p_precondition)
    RETURNING object INTO v_object;
    IF NOT FOUND THEN
        SELECT resource_version INTO v_current FROM objects
        WHERE api_group = p_group AND resource = p_resource AND namespace = p_namespace AND name = p_name;
        IF v_current IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'KR404', MESSAGE = '0 0';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'KR409', MESSAGE = '0 ' || v_current::text;
    END IF;
    v_object := jsonb_set(v_object, '{metadata,resourceVersion}', to_jsonb(v_rv::text));
    INSERT INTO revisions (rv, api_group, resource, namespace, name, event_type, object)
    VALUES (v_rv, p_group, p_resource, p_namespace, p_name, 'DELETED', v_object);
    PERFORM pg_notify('kairon_revisions', v_rv::text);
    RETURN v_object;
END
$$;
