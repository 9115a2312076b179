package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/inorder/inorder/internal/retry"
	"github.com/inorder/inorder/seqstore"
)

// The lease capability lives in three tables (migration 3): <prefix>lease_ns
// holds a namespace's topology, token counter and view version, and every
// call that writes the namespace's leases or members first locks its row
// (SELECT ... FOR UPDATE; on SQLite the immediate transaction holds the
// database's write lock), so that calls of one namespace run one after
// another, across processes. <prefix>lease holds a row per shard with a
// lease, <prefix>member a row per member. Every expiry is computed by the
// database's clock (Dialect.nowMicros) and compared in SQL.

var _ seqstore.Leaser = (*Store)(nil)

// Topology implements seqstore.Leaser. The topology is stored as JSON.
func (s *Store) Topology(ctx context.Context, ns string, t seqstore.Topology) error {
	if err := seqstore.CheckLease(ns, t.Check()); err != nil {
		return fmt.Errorf("sqlstore: topology: %w", err)
	}
	want, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("sqlstore: topology: %w", err)
	}
	err = s.leaseTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, _, err := s.lockNS(ctx, tx, ns, true); err != nil {
			return err
		}
		var stored []byte
		if err := tx.QueryRowContext(ctx, s.ph("SELECT topology FROM "+s.prefix+"lease_ns WHERE ns = ?"), ns).Scan(&stored); err != nil {
			return err
		}
		if stored == nil {
			_, err := tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"lease_ns SET topology = ? WHERE ns = ?"), string(want), ns)
			return err
		}
		var got seqstore.Topology
		if err := json.Unmarshal(stored, &got); err != nil {
			return fmt.Errorf("%w: stored topology of %q: %v", seqstore.ErrCorrupt, ns, err)
		}
		if !got.Equal(t) {
			return fmt.Errorf("%w: %q stores %+v, given %+v", seqstore.ErrTopology, ns, got, t)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlstore: topology: %w", err)
	}
	return nil
}

// Heartbeat implements seqstore.Leaser.
func (s *Store) Heartbeat(ctx context.Context, ns string, m seqstore.Member, ttl time.Duration) (seqstore.View, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckMember(m), seqstore.CheckTTL(ttl)); err != nil {
		return seqstore.View{}, fmt.Errorf("sqlstore: heartbeat: %w", err)
	}
	now := s.dialect.nowMicros()
	var v seqstore.View
	err := s.leaseTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, version, err := s.lockNS(ctx, tx, ns, true)
		if err != nil {
			return err
		}
		v = seqstore.View{Version: uint64(version)}
		res, err := tx.ExecContext(ctx, s.ph("DELETE FROM "+s.prefix+"member WHERE ns = ? AND expires_at <= "+now), ns)
		if err != nil {
			return err
		}
		changed := false
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n > 0 {
			v.Version++ // the sweep
		}
		var name string
		var weight int
		err = tx.QueryRowContext(ctx, s.ph("SELECT name, weight FROM "+s.prefix+"member WHERE ns = ? AND incarnation = ?"), ns, m.Incarnation).Scan(&name, &weight)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			changed = true
			_, err = tx.ExecContext(ctx, s.ph("INSERT INTO "+s.prefix+"member (ns, incarnation, name, weight, expires_at) VALUES (?, ?, ?, ?, "+now+" + ?)"),
				ns, m.Incarnation, m.Name, m.Weight, ttl.Microseconds())
		case err == nil:
			changed = name != m.Name || weight != m.Weight
			_, err = tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"member SET name = ?, weight = ?, expires_at = "+now+" + ? WHERE ns = ? AND incarnation = ?"),
				m.Name, m.Weight, ttl.Microseconds(), ns, m.Incarnation)
		}
		if err != nil {
			return err
		}
		if changed {
			v.Version++
		}
		if v.Version != uint64(version) {
			if _, err := tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"lease_ns SET view_version = ? WHERE ns = ?"), int64(v.Version), ns); err != nil {
				return err
			}
			if err := s.notify(ctx, tx, ns); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, s.ph("SELECT incarnation, name, weight FROM "+s.prefix+"member WHERE ns = ?"), ns)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		v.Members = v.Members[:0]
		for rows.Next() {
			var mm seqstore.Member
			if err := rows.Scan(&mm.Incarnation, &mm.Name, &mm.Weight); err != nil {
				return err
			}
			v.Members = append(v.Members, mm)
		}
		return rows.Err()
	})
	if err != nil {
		return seqstore.View{}, fmt.Errorf("sqlstore: heartbeat of %q in %q: %w", m.Incarnation, ns, err)
	}
	// Sorted here: the databases' collations disagree on byte order.
	seqstore.SortMembers(v.Members)
	return v, nil
}

// Acquire implements seqstore.Leaser: one transaction under the
// namespace's lock takes each free shard (no row, or an expired one) with
// the next token.
func (s *Store) Acquire(ctx context.Context, ns string, shards []int, owner string, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckShards(shards), seqstore.CheckOwner(owner), seqstore.CheckTTL(ttl)); err != nil {
		return nil, fmt.Errorf("sqlstore: acquire: %w", err)
	}
	if len(shards) == 0 {
		return nil, s.leaseReady(ctx, "acquire")
	}
	now := s.dialect.nowMicros()
	// No upsert: MySQL with clientFoundRows counts a row an upsert found as
	// affected. The namespace's lock makes the look, then the insert, safe.
	exists := "SELECT COUNT(*) FROM " + s.prefix + "lease WHERE ns = ? AND shard = ?"
	insert := "INSERT INTO " + s.prefix + "lease (ns, shard, owner, token, expires_at) VALUES (?, ?, ?, ?, " + now + " + ?)"
	var out []seqstore.Lease
	err := s.leaseTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		token, _, err := s.lockNS(ctx, tx, ns, true)
		if err != nil {
			return err
		}
		next := token
		for _, shard := range slices.Sorted(slices.Values(shards)) {
			// An expired row is taken over; no row is inserted. The
			// conditions are re-checked on the row itself, so a renewal
			// committed meanwhile keeps its lease.
			res, err := tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"lease SET owner = ?, token = ?, expires_at = "+now+" + ? WHERE ns = ? AND shard = ? AND expires_at <= "+now),
				owner, next+1, ttl.Microseconds(), ns, shard)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
				var rows int
				if err := tx.QueryRowContext(ctx, s.ph(exists), ns, shard).Scan(&rows); err != nil {
					return err
				}
				if rows == 0 { // else a live lease holds the shard
					if _, err = tx.ExecContext(ctx, s.ph(insert), ns, shard, owner, next+1, ttl.Microseconds()); err != nil {
						return err
					}
					n = 1
				}
			}
			if n == 1 {
				next++
				out = append(out, seqstore.Lease{Shard: shard, Token: uint64(next), Owner: owner})
			}
		}
		if next == token {
			return nil
		}
		_, err = tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"lease_ns SET next_token = ? WHERE ns = ?"), next, ns)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: acquire for %q in %q: %w", owner, ns, err)
	}
	return out, nil
}

// Renew implements seqstore.Leaser, in one transaction.
func (s *Store) Renew(ctx context.Context, ns string, held []seqstore.Lease, ttl time.Duration) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns, seqstore.CheckLeases(held), seqstore.CheckTTL(ttl)); err != nil {
		return nil, fmt.Errorf("sqlstore: renew: %w", err)
	}
	if len(held) == 0 {
		return nil, s.leaseReady(ctx, "renew")
	}
	now := s.dialect.nowMicros()
	var lost []seqstore.Lease
	err := s.leaseTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		lost = lost[:0]
		for _, h := range held {
			res, err := tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"lease SET expires_at = "+now+" + ? WHERE ns = ? AND shard = ? AND token = ? AND owner = ? AND expires_at > "+now),
				ttl.Microseconds(), ns, h.Shard, int64(h.Token), h.Owner)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
				// MySQL counts a row whose value did not change (the same
				// microsecond) as unaffected: look again.
				err := tx.QueryRowContext(ctx, s.ph("SELECT COUNT(*) FROM "+s.prefix+"lease WHERE ns = ? AND shard = ? AND token = ? AND owner = ? AND expires_at > "+now),
					ns, h.Shard, int64(h.Token), h.Owner).Scan(&n)
				if err != nil {
					return err
				}
			}
			if n == 0 {
				lost = append(lost, h)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: renew in %q: %w", ns, err)
	}
	return lost, nil
}

// Release implements seqstore.Leaser: it deletes the rows of the held
// leases; the token counter is in the namespace's row.
func (s *Store) Release(ctx context.Context, ns string, held []seqstore.Lease) error {
	if err := seqstore.CheckLease(ns, seqstore.CheckLeases(held)); err != nil {
		return fmt.Errorf("sqlstore: release: %w", err)
	}
	if len(held) == 0 {
		return s.leaseReady(ctx, "release")
	}
	err := s.leaseTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		released := int64(0)
		for _, h := range held {
			res, err := tx.ExecContext(ctx, s.ph("DELETE FROM "+s.prefix+"lease WHERE ns = ? AND shard = ? AND token = ? AND owner = ?"),
				ns, h.Shard, int64(h.Token), h.Owner)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			released += n
		}
		if released == 0 {
			return nil
		}
		return s.notify(ctx, tx, ns)
	})
	if err != nil {
		return fmt.Errorf("sqlstore: release in %q: %w", ns, err)
	}
	return nil
}

// Leave implements seqstore.Leaser.
func (s *Store) Leave(ctx context.Context, ns string, incarnation string) error {
	if err := seqstore.CheckLease(ns, seqstore.CheckOwner(incarnation)); err != nil {
		return fmt.Errorf("sqlstore: leave: %w", err)
	}
	err := s.leaseTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, version, err := s.lockNS(ctx, tx, ns, false)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // an unknown namespace has no members
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.ph("DELETE FROM "+s.prefix+"member WHERE ns = ? AND incarnation = ?"), ns, incarnation)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if _, err = tx.ExecContext(ctx, s.ph("UPDATE "+s.prefix+"lease_ns SET view_version = ? WHERE ns = ?"), version+1, ns); err != nil {
			return err
		}
		return s.notify(ctx, tx, ns)
	})
	if err != nil {
		return fmt.Errorf("sqlstore: leave of %q from %q: %w", incarnation, ns, err)
	}
	return nil
}

// Leases implements seqstore.Leaser, in one statement.
func (s *Store) Leases(ctx context.Context, ns string) ([]seqstore.Lease, error) {
	if err := seqstore.CheckLease(ns); err != nil {
		return nil, fmt.Errorf("sqlstore: leases: %w", err)
	}
	if err := s.leaseReady(ctx, "leases"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.ph("SELECT shard, token, owner FROM "+s.prefix+"lease WHERE ns = ? AND expires_at > "+s.dialect.nowMicros()+" ORDER BY shard"), ns)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: leases of %q: %w", ns, err)
	}
	defer func() { _ = rows.Close() }()
	var out []seqstore.Lease
	for rows.Next() {
		var l seqstore.Lease
		var token int64
		if err := rows.Scan(&l.Shard, &token, &l.Owner); err != nil {
			return nil, fmt.Errorf("sqlstore: leases of %q: %w", ns, err)
		}
		l.Token = uint64(token)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: leases of %q: %w", ns, err)
	}
	return out, nil
}

// lockNS locks ns's row for the rest of tx, creating it first when create
// is set, and returns its token counter and view version. Without create, a
// missing row is sql.ErrNoRows.
func (s *Store) lockNS(ctx context.Context, tx *sql.Tx, ns string, create bool) (token, version int64, err error) {
	if create {
		q := "INSERT INTO " + s.prefix + "lease_ns (ns) VALUES (?)"
		if s.dialect == MySQL {
			// Unlike INSERT IGNORE, this takes the exclusive lock on an
			// existing row, and ignores nothing but the duplicate.
			q += " ON DUPLICATE KEY UPDATE ns = ns"
		} else {
			q += " ON CONFLICT (ns) DO NOTHING"
		}
		if _, err := tx.ExecContext(ctx, s.ph(q), ns); err != nil {
			return 0, 0, err
		}
	}
	err = tx.QueryRowContext(ctx, s.ph("SELECT next_token, view_version FROM "+s.prefix+"lease_ns WHERE ns = ?"+s.lockSuffix()), ns).Scan(&token, &version)
	return token, version, err
}

// leaseTx runs f in a transaction, again after a transient failure (a busy
// database, a deadlock), within ctx.
func (s *Store) leaseTx(ctx context.Context, f func(ctx context.Context, tx *sql.Tx) error) error {
	if err := s.leaseReady(ctx, ""); err != nil {
		return err
	}
	p := retry.Policy{
		Backoff:     txBackoff,
		MaxAttempts: txAttempts,
		Sleep:       s.sleep,
		Retryable:   transient,
		OnRetry:     func(int, error, time.Duration) { s.retries.Add(1) },
	}
	return retry.Call(ctx, p, func(ctx context.Context, _ int) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if err := f(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
}

// leaseReady fails a lease call on a closed store or an ended context.
func (s *Store) leaseReady(ctx context.Context, op string) error {
	var err error
	if s.isClosed() {
		err = seqstore.ErrClosed
	} else {
		err = ctx.Err()
	}
	if err != nil && op != "" {
		return fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	return err
}
