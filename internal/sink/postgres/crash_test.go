package postgres_test

const crashChildEnv = "TIDE_PG_CRASH_CHILD"

func crashChild() int { return 2 }
