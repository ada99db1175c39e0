package cm

// Temporary bodies so the API compiles while the state machine is built
// (replaced by manager.go / id.go).

type mgr struct{}
type id struct{}

func newManager(Config) (*Manager, error)             { return &Manager{}, nil }
func (m *mgr) createID(Handler, any) (*ID, error)     { return &ID{}, nil }
func (m *mgr) deliver(Addr, []byte)                   {}
func (m *mgr) stats() Stats                           { return Stats{} }
func (m *mgr) close()                                 {}
func (c *id) context() any                            { return nil }
func (c *id) setContext(any)                          {}
func (c *id) state() State                            { return StateIdle }
func (c *id) localCommID() uint32                     { return 0 }
func (c *id) remoteCommID() uint32                    { return 0 }
func (c *id) serviceID() uint64                       { return 0 }
func (c *id) listen(uint64, uint64) error             { return ErrInvalidState }
func (c *id) sendREQ(*REQParam) error                 { return ErrInvalidState }
func (c *id) sendREP(*REPParam) error                 { return ErrInvalidState }
func (c *id) sendRTU([]byte) error                    { return ErrInvalidState }
func (c *id) sendREJ(RejReason, []byte, []byte) error { return ErrInvalidState }
func (c *id) sendMRA(uint8, []byte) error             { return ErrInvalidState }
func (c *id) sendDREQ([]byte) error                   { return ErrInvalidState }
func (c *id) sendDREP([]byte) error                   { return ErrInvalidState }
func (c *id) sendSIDRREQ(*SIDRREQParam) error         { return ErrInvalidState }
func (c *id) sendSIDRREP(*SIDRREPParam) error         { return ErrInvalidState }
func (c *id) established() error                      { return ErrInvalidState }
func (c *id) initQPAttr(QPState) (QPAttr, error)      { return QPAttr{}, ErrInvalidState }
func (c *id) destroy()                                {}
