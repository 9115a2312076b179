package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/inorder/inorder/seqstore/sqlstore"
)

func init() {
	sqlStores = func(e *environment) []storeKind {
		var ss []storeKind
		if e.postgresDSN != "" {
			ss = append(ss, storeKind{name: "postgres", open: func(ctx context.Context, e *environment) (*openStore, error) {
				return openSQL(ctx, "pgx", e.postgresDSN, sqlstore.Postgres)
			}})
		}
		if e.mysqlDSN != "" {
			ss = append(ss, storeKind{name: "mysql", open: func(ctx context.Context, e *environment) (*openStore, error) {
				return openSQL(ctx, "mysql", e.mysqlDSN, sqlstore.MySQL)
			}})
		}
		return ss
	}
}

func openSQL(ctx context.Context, driverName, dsn string, dialect sqlstore.Dialect) (*openStore, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(16)
	s, err := sqlstore.Open(db, dialect, &sqlstore.Options{TablePrefix: "inorder_bench_"})
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		db.Close()
		return nil, err
	}
	return &openStore{
		s: s,
		notes: func(messages int) string {
			st := s.Stats()
			return fmt.Sprintf("%.4f transactions/msg", float64(st.Transactions)/float64(messages))
		},
		close: func() {
			s.Close()
			db.Close()
		},
	}, nil
}
