package store

// GridSQLForTest and ListRunsByDAGSQLForTest are the statements of
// DAGGrid and of ListRuns filtered by DAG, for their plan test. Test
// builds only.
var (
	GridSQLForTest          = gridSQL
	ListRunsByDAGSQLForTest = listRunsSQL(false, true)
)
