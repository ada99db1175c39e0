package layers

import (
	"fmt"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// ext is what every extension-header layer shares: the base layer and the
// BTH it belongs to, which knows from the opcode what follows.
type ext struct {
	gplayers.BaseLayer
	bth *BTH
}

func (e *ext) nextAfter(h wire.Headers) gopacket.LayerType {
	if e.bth == nil {
		return gopacket.LayerTypePayload
	}
	return e.bth.next(h)
}

// split checks that data holds a header of size bytes and sets Contents
// and Payload.
func (e *ext) split(data []byte, size int, name string, df gopacket.DecodeFeedback) error {
	if len(data) < size {
		df.SetTruncated()
		return fmt.Errorf("layers: %s needs %d bytes, have %d", name, size, len(data))
	}
	e.Contents, e.Payload = data[:size], data[size:]
	return nil
}

// extLayer is the interface every extension layer implements.
type extLayer interface {
	gopacket.DecodingLayer
	gopacket.Layer
	setBTH(*BTH)
}

func (e *ext) setBTH(b *BTH) { e.bth = b }

// newExt returns an empty layer for extension header h, tied to bth.
func newExt(h wire.Headers, bth *BTH) extLayer {
	var l extLayer
	switch h {
	case wire.HdrRDETH:
		l = &RDETH{}
	case wire.HdrDETH:
		l = &DETH{}
	case wire.HdrFETH:
		l = &FETH{}
	case wire.HdrRETH:
		l = &RETH{}
	case wire.HdrAtomicETH:
		l = &AtomicETH{}
	case wire.HdrAETH:
		l = &AETH{}
	case wire.HdrAtomicAckETH:
		l = &AtomicAckETH{}
	case wire.HdrImmDt:
		l = &ImmDt{}
	default:
		l = &IETH{}
	}
	l.setBTH(bth)
	return l
}

// extDecoder is the gopacket decoder of a standalone extension header
// (one decoded without its BTH, so followed by the payload).
func extDecoder(h wire.Headers) gopacket.Decoder {
	return gopacket.DecodeFunc(func(data []byte, p gopacket.PacketBuilder) error {
		l := newExt(h, nil)
		if err := l.DecodeFromBytes(data, p); err != nil {
			return err
		}
		p.AddLayer(l)
		return p.NextDecoder(l.NextLayerType())
	})
}

// RDETH is the layer of a Reliable Datagram Extended Transport Header.
type RDETH struct {
	ext
	wire.RDETHFields
}

// DETH is the layer of a Datagram Extended Transport Header.
type DETH struct {
	ext
	wire.DETHFields
}

// FETH is the layer of a Flush Extended Transport Header.
type FETH struct {
	ext
	wire.FETHFields
}

// RETH is the layer of an RDMA Extended Transport Header.
type RETH struct {
	ext
	wire.RETHFields
}

// AtomicETH is the layer of an Atomic Extended Transport Header.
type AtomicETH struct {
	ext
	wire.AtomicETHFields
}

// AETH is the layer of an ACK Extended Transport Header.
type AETH struct {
	ext
	wire.AETHFields
}

// AtomicAckETH is the layer of an Atomic Acknowledge Extended Transport
// Header.
type AtomicAckETH struct {
	ext
	wire.AtomicAckETHFields
}

// ImmDt is the layer of an Immediate Data header.
type ImmDt struct {
	ext
	wire.ImmDtFields
}

// IETH is the layer of an Invalidate Extended Transport Header.
type IETH struct {
	ext
	wire.IETHFields
}

// LayerType, CanDecode, NextLayerType, DecodeFromBytes and SerializeTo of
// each extension layer. DecodeFromBytes does not allocate; SerializeTo
// prepends the header.

func (l *RDETH) LayerType() gopacket.LayerType      { return LayerTypeRDETH }
func (l *RDETH) CanDecode() gopacket.LayerClass     { return LayerTypeRDETH }
func (l *RDETH) NextLayerType() gopacket.LayerType  { return l.nextAfter(wire.HdrRDETH) }
func (l *DETH) LayerType() gopacket.LayerType       { return LayerTypeDETH }
func (l *DETH) CanDecode() gopacket.LayerClass      { return LayerTypeDETH }
func (l *DETH) NextLayerType() gopacket.LayerType   { return l.nextAfter(wire.HdrDETH) }
func (l *FETH) LayerType() gopacket.LayerType       { return LayerTypeFETH }
func (l *FETH) CanDecode() gopacket.LayerClass      { return LayerTypeFETH }
func (l *FETH) NextLayerType() gopacket.LayerType   { return l.nextAfter(wire.HdrFETH) }
func (l *RETH) LayerType() gopacket.LayerType       { return LayerTypeRETH }
func (l *RETH) CanDecode() gopacket.LayerClass      { return LayerTypeRETH }
func (l *RETH) NextLayerType() gopacket.LayerType   { return l.nextAfter(wire.HdrRETH) }
func (l *AtomicETH) LayerType() gopacket.LayerType  { return LayerTypeAtomicETH }
func (l *AtomicETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicETH }
func (l *AtomicETH) NextLayerType() gopacket.LayerType {
	return l.nextAfter(wire.HdrAtomicETH)
}
func (l *AETH) LayerType() gopacket.LayerType         { return LayerTypeAETH }
func (l *AETH) CanDecode() gopacket.LayerClass        { return LayerTypeAETH }
func (l *AETH) NextLayerType() gopacket.LayerType     { return l.nextAfter(wire.HdrAETH) }
func (l *AtomicAckETH) LayerType() gopacket.LayerType { return LayerTypeAtomicAckETH }
func (l *AtomicAckETH) CanDecode() gopacket.LayerClass {
	return LayerTypeAtomicAckETH
}
func (l *AtomicAckETH) NextLayerType() gopacket.LayerType {
	return l.nextAfter(wire.HdrAtomicAckETH)
}
func (l *ImmDt) LayerType() gopacket.LayerType     { return LayerTypeImmDt }
func (l *ImmDt) CanDecode() gopacket.LayerClass    { return LayerTypeImmDt }
func (l *ImmDt) NextLayerType() gopacket.LayerType { return l.nextAfter(wire.HdrImmDt) }
func (l *IETH) LayerType() gopacket.LayerType      { return LayerTypeIETH }
func (l *IETH) CanDecode() gopacket.LayerClass     { return LayerTypeIETH }
func (l *IETH) NextLayerType() gopacket.LayerType  { return l.nextAfter(wire.HdrIETH) }

func (l *RDETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.RDETHSize, "RDETH", df); err != nil {
		return err
	}
	l.RDETHFields = wire.RDETH(l.Contents).Fields()
	return nil
}

func (l *DETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.DETHSize, "DETH", df); err != nil {
		return err
	}
	l.DETHFields = wire.DETH(l.Contents).Fields()
	return nil
}

func (l *FETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.FETHSize, "FETH", df); err != nil {
		return err
	}
	l.FETHFields = wire.FETH(l.Contents).Fields()
	return nil
}

func (l *RETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.RETHSize, "RETH", df); err != nil {
		return err
	}
	l.RETHFields = wire.RETH(l.Contents).Fields()
	return nil
}

func (l *AtomicETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.AtomicETHSize, "AtomicETH", df); err != nil {
		return err
	}
	l.AtomicETHFields = wire.AtomicETH(l.Contents).Fields()
	return nil
}

func (l *AETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.AETHSize, "AETH", df); err != nil {
		return err
	}
	l.AETHFields = wire.AETH(l.Contents).Fields()
	return nil
}

func (l *AtomicAckETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.AtomicAckETHSize, "AtomicAckETH", df); err != nil {
		return err
	}
	l.AtomicAckETHFields = wire.AtomicAckETH(l.Contents).Fields()
	return nil
}

func (l *ImmDt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.ImmDtSize, "ImmDt", df); err != nil {
		return err
	}
	l.ImmDtFields = wire.ImmDt(l.Contents).Fields()
	return nil
}

func (l *IETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.split(data, wire.IETHSize, "IETH", df); err != nil {
		return err
	}
	l.IETHFields = wire.IETH(l.Contents).Fields()
	return nil
}

func (l *RDETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.RDETHSize)
	if err == nil {
		wire.RDETH(h).Encode(&l.RDETHFields)
	}
	return err
}

func (l *DETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.DETHSize)
	if err == nil {
		wire.DETH(h).Encode(&l.DETHFields)
	}
	return err
}

func (l *FETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.FETHSize)
	if err == nil {
		wire.FETH(h).Encode(&l.FETHFields)
	}
	return err
}

func (l *RETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.RETHSize)
	if err == nil {
		wire.RETH(h).Encode(&l.RETHFields)
	}
	return err
}

func (l *AtomicETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.AtomicETHSize)
	if err == nil {
		wire.AtomicETH(h).Encode(&l.AtomicETHFields)
	}
	return err
}

func (l *AETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.AETHSize)
	if err == nil {
		wire.AETH(h).Encode(&l.AETHFields)
	}
	return err
}

func (l *AtomicAckETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.AtomicAckETHSize)
	if err == nil {
		wire.AtomicAckETH(h).Encode(&l.AtomicAckETHFields)
	}
	return err
}

func (l *ImmDt) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.ImmDtSize)
	if err == nil {
		wire.ImmDt(h).Encode(&l.ImmDtFields)
	}
	return err
}

func (l *IETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(wire.IETHSize)
	if err == nil {
		wire.IETH(h).Encode(&l.IETHFields)
	}
	return err
}
