-- lakewrite control-plane schema, version 10: intent leases.
--
-- Unqualified names, applied with search_path set to the configured schema.

-- The lease of an open intent whose writer cannot hold a session lock (its
-- connection goes through a pooler, where a session lock would stay on a
-- shared server connection): the writer is alive while lease_until is in
-- the future by the database clock. The writer renews it while its write
-- runs (now + the configured lease); once it lapses, the intent is
-- reconciled like one whose session lock is gone. Taking an intent over
-- bumps its attempt, the lease's epoch: the old writer's commit and renewals
-- name the attempt they hold and are refused from then on. NULL: the intent
-- has no lease (it holds a session lock, lock_key, or has no liveness).
ALTER TABLE pipeline_build_transactions ADD COLUMN lease_until timestamptz;
