package serving

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections at a time; Accept waits
// while n are open. Each open connection costs the server buffers and a
// goroutine that no request budget counts, so a listener anyone may reach
// bounds them.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func limitConnections(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// limitedConn gives its slot back when it is first closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
