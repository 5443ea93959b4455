package store

// GridSQLForTest is the statement of DAGGrid, for its plan test. Test
// builds only.
const GridSQLForTest = gridSQL
