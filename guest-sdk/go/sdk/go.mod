module xdst.dev/guest

go 1.24
