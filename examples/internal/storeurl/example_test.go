package storeurl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/seqstore"
)

// Parse checks a spec without connecting; the spec prints without its
// password.
func ExampleParse() {
	s, err := storeurl.Parse("postgres://app:secret@db.internal:5432/orders?sslmode=require&prefix=shop_")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Kind, s.Prefix)
	fmt.Println(s)

	_, err = storeurl.Parse("mysql://app:secret@db.internal:3306")
	fmt.Println(err)
	// Output:
	// postgres shop_
	// postgres://app:xxxxx@db.internal:5432/orders?sslmode=require&prefix=shop_
	// storeurl: invalid spec: mysql://app:xxxxx@db.internal:3306: path "": want one database name, mysql://user:pass@host:port/db
}

// Open returns a ready store; Close closes it and the database under it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "storeurl-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	b, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(dir, "state.db")+"?prefix=app_", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	rs, err := b.Store.Reserve(ctx, []seqstore.ReserveRequest{{Stream: seqstore.Stream{Queue: "orders", Group: "customer-42"}, N: 3}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Kind(), "first seq", rs[0].First)
	// Output: sqlite first seq 1
}
