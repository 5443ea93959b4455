-- Vigil schema, version 14: task_instances.run_as_user, the OS user a
-- task's run_as_user names (dag.Task.RunAsUser), snapshotted at trigger
-- time with the rest of the task and handed to the claiming agent, which
-- runs the task as that user only when its --task-users-allowed lists it
-- (docs/task-environment.md). NULL: the agent's --task-user, or its own.
ALTER TABLE task_instances ADD COLUMN run_as_user text;

---- create above / drop below ----

ALTER TABLE task_instances DROP COLUMN run_as_user;
