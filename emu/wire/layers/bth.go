package layers

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// BTH is the gopacket layer of a RoCEv2 Base Transport Header. Decoding
// runs the whole wire.Parse gate over the UDP payload, so a BTH layer is
// only produced for a structurally valid RoCEv2 packet. Contents is the 12
// BTH bytes; Payload is the extension headers and the payload (without pad
// and ICRC).
type BTH struct {
	gplayers.BaseLayer
	wire.BTHFields
	// Pad is the PadCnt bytes after the payload.
	Pad []byte
	// ICRC is the invariant CRC as carried (on decode) or to be written
	// when serializing without ComputeChecksums.
	ICRC uint32

	headers wire.Headers // the opcode's extension headers, from decoding

	network gopacket.NetworkLayer // set by SetICRCLayers
	udp     *gplayers.UDP
}

// LayerType returns LayerTypeBTH.
func (b *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the first extension header's layer type, or the
// payload if the opcode carries none.
func (b *BTH) NextLayerType() gopacket.LayerType {
	if h := b.headers.First(); h != 0 {
		return layerTypeOf(h)
	}
	return gopacket.LayerTypePayload
}

// next returns the layer type after extension header h.
func (b *BTH) next(h wire.Headers) gopacket.LayerType {
	if n := b.headers.After(h); n != 0 {
		return layerTypeOf(n)
	}
	return gopacket.LayerTypePayload
}

// DecodeFromBytes decodes a UDP payload (BTH through ICRC). It does not
// allocate.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	var p wire.Packet
	if err := wire.Parse(data, &p); err != nil {
		if errors.Is(err, wire.ErrTruncated) {
			df.SetTruncated()
		}
		return err
	}
	b.BTHFields = p.BTH.Fields()
	b.headers = p.Opcode().Headers()
	end := p.HeaderLen() + len(p.Payload)
	b.Contents = data[:wire.BTHSize]
	b.Payload = data[wire.BTHSize:end]
	b.Pad = p.Pad
	b.ICRC = p.ICRC()
	return nil
}

// decodeBTH is the gopacket decoder behind LayerTypeBTH. It adds the BTH
// and then one layer per extension header itself, because which header
// follows depends on the opcode, and leaves the payload to
// gopacket.LayerTypePayload.
func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	rest := b.Payload
	for h := b.headers; h != 0; h &= h - 1 {
		l := newExt(h&-h, b)
		if err := l.DecodeFromBytes(rest, p); err != nil {
			return err
		}
		p.AddLayer(l)
		rest = l.LayerPayload()
	}
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// SetICRCLayers gives the BTH the IP and UDP layers it will be serialized
// under, so that SerializeTo with ComputeChecksums can compute the ICRC,
// which covers them (as UDP.SetNetworkLayerForChecksum does for the UDP
// checksum). network must be a *layers.IPv4 or *layers.IPv6.
func (b *BTH) SetICRCLayers(network gopacket.NetworkLayer, udp *gplayers.UDP) error {
	switch network.(type) {
	case *gplayers.IPv4, *gplayers.IPv6:
	default:
		return fmt.Errorf("layers: ICRC needs an IPv4 or IPv6 layer, not %T", network)
	}
	if udp == nil {
		return errors.New("layers: ICRC needs the UDP layer")
	}
	b.network, b.udp = network, udp
	return nil
}

// SerializeTo writes the BTH in front of the already serialized extension
// headers and payload, and appends the pad and the ICRC.
//
//   - FixLengths sets PadCount to (−payload length) & 3; otherwise
//     PadCount is used as given. Pad bytes are zero.
//   - ComputeChecksums computes the ICRC if SetICRCLayers was called,
//     by serializing copies of the IP and UDP layers as they will appear
//     (lengths fixed if FixLengths is set); otherwise the ICRC field is
//     written as given. Without SetICRCLayers, seal the finished frame with
//     wire.ParseFrame and Frame.Seal instead.
func (b *BTH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	op := b.Opcode
	if !op.IsValid() {
		return fmt.Errorf("layers: cannot serialize opcode %#02x", uint8(op))
	}
	n := len(buf.Bytes()) - op.Headers().Len()
	if n < 0 {
		return fmt.Errorf("layers: %v needs its %v layers before the payload", op, op.Headers())
	}
	f := b.BTHFields
	if opts.FixLengths {
		f.PadCount = uint8(wire.PadLen(n))
	}
	tail, err := buf.AppendBytes(int(f.PadCount&3) + wire.ICRCSize)
	if err != nil {
		return err
	}
	clear(tail)
	hdr, err := buf.PrependBytes(wire.BTHSize)
	if err != nil {
		return err
	}
	wire.BTH(hdr).Encode(&f)
	b.PadCount = f.PadCount
	pkt := buf.Bytes()
	icrc := b.ICRC
	if opts.ComputeChecksums && b.network != nil {
		if icrc, err = b.computeICRC(pkt, opts); err != nil {
			return err
		}
		b.ICRC = icrc
	}
	wire.PutICRC(pkt, icrc)
	return nil
}

// computeICRC serializes copies of the IP and UDP layers over a stand-in
// for pkt, exactly as SerializeLayers will, and computes the ICRC of pkt
// under them.
func (b *BTH) computeICRC(pkt []byte, opts gopacket.SerializeOptions) (uint32, error) {
	udpOpts := opts
	udpOpts.ComputeChecksums = false // masked by the ICRC anyway
	sb := gopacket.NewSerializeBuffer()
	if _, err := sb.PrependBytes(len(pkt)); err != nil {
		return 0, err
	}
	u := *b.udp
	if err := u.SerializeTo(sb, udpOpts); err != nil {
		return 0, err
	}
	udpHdr := append([]byte(nil), sb.Bytes()[:wire.UDPSize]...)
	switch ip := b.network.(type) {
	case *gplayers.IPv4:
		c := *ip
		if err := c.SerializeTo(sb, opts); err != nil {
			return 0, err
		}
		return wire.ICRCIPv4(sb.Bytes()[:int(c.IHL)*4], udpHdr, pkt), nil
	case *gplayers.IPv6:
		c := *ip
		if err := c.SerializeTo(sb, opts); err != nil {
			return 0, err
		}
		if c.HopByHop != nil || c.NextHeader != gplayers.IPProtocolUDP {
			return 0, errors.New("layers: RoCEv2 puts UDP right after the IPv6 header")
		}
		return wire.ICRCIPv6(sb.Bytes()[:wire.IPv6Size], udpHdr, pkt), nil
	}
	return 0, errors.New("layers: no network layer for the ICRC")
}
