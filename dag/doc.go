// Package dag defines Vigil's DAG spec: the Go types, the YAML and JSON
// encodings, and the validation rules of docs/design.md §9.
//
// A spec is one YAML document:
//
//	dag_id: nightly-etl
//	timeout: 1h                 # run timeout (optional)
//	max_active_tasks: 16
//	tasks:
//	  - id: extract
//	    command: ["sh", "-c", "..."]
//	    tags: [script]          # required agent tags
//	    retries: 2
//	    retry_delay: 10s
//	    execution_timeout: 5m
//	    run_as_user: etl        # OS user on the agent (optional)
//	  - id: load
//	    depends_on: [extract]
//	    command: ["sh", "-c", "..."]
//
// [Parse] is strict: unknown fields, malformed durations and negative
// durations are errors that name the field and line. Every rule broken by a
// decoded spec is reported at once by [Spec.Validate], each as
// `dag "ID": task "ID": FIELD: RULE`, so a user fixes a file in one pass.
//
// Parse bounds its work on untrusted input (the API accepts specs): the
// input size, the number of YAML nodes after alias expansion, the keys per
// mapping and the number of tasks are all capped.
package dag
