// Package layers makes gopacket understand RoCEv2: it registers a layer type
// for the BTH and for each extension header, hooks UDP port 4791, and
// implements gopacket.DecodingLayer and gopacket.SerializableLayer on top of
// package wire. It is for tools and tests (pcap decoding, building odd
// packets); the data path uses package wire directly, since gopacket layers
// are decoded structs.
//
// Importing the package registers the layer types and the UDP port (an
// init side effect, like gopacket/layers itself), so that
//
//	gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//
// on a RoCEv2 frame yields Ethernet, IPv4/IPv6, UDP, BTH, one layer per
// extension header in wire order (e.g. RETH then ImmDt), and the payload.
// The pad and the ICRC are held by the BTH layer (BTH.Pad, BTH.ICRC) and
// belong to no layer's contents, as an Ethernet trailer does not.
//
// With gopacket.DecodingLayerParser, use the layers of one Stack (NewStack):
// which extension header follows another depends on the opcode, so the
// extension layers of a Stack consult the Stack's BTH.
package layers

import (
	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"

	"github.com/irdma-emu/irdma-emu/emu/wire"
)

// Layer type numbers. gopacket reserves 0–999 for itself and suggests
// 1000–1999 for applications; this package takes 1791–1800 (after the
// RoCEv2 port, 4791).
const (
	layerNumBTH = 1791 + iota
	layerNumRDETH
	layerNumDETH
	layerNumFETH
	layerNumRETH
	layerNumAtomicETH
	layerNumAETH
	layerNumAtomicAckETH
	layerNumImmDt
	layerNumIETH
)

// The layer types.
var (
	LayerTypeBTH = gopacket.RegisterLayerType(layerNumBTH,
		gopacket.LayerTypeMetadata{Name: "BTH", Decoder: gopacket.DecodeFunc(decodeBTH)})
	LayerTypeRDETH = gopacket.RegisterLayerType(layerNumRDETH,
		gopacket.LayerTypeMetadata{Name: "RDETH", Decoder: extDecoder(wire.HdrRDETH)})
	LayerTypeDETH = gopacket.RegisterLayerType(layerNumDETH,
		gopacket.LayerTypeMetadata{Name: "DETH", Decoder: extDecoder(wire.HdrDETH)})
	LayerTypeFETH = gopacket.RegisterLayerType(layerNumFETH,
		gopacket.LayerTypeMetadata{Name: "FETH", Decoder: extDecoder(wire.HdrFETH)})
	LayerTypeRETH = gopacket.RegisterLayerType(layerNumRETH,
		gopacket.LayerTypeMetadata{Name: "RETH", Decoder: extDecoder(wire.HdrRETH)})
	LayerTypeAtomicETH = gopacket.RegisterLayerType(layerNumAtomicETH,
		gopacket.LayerTypeMetadata{Name: "AtomicETH", Decoder: extDecoder(wire.HdrAtomicETH)})
	LayerTypeAETH = gopacket.RegisterLayerType(layerNumAETH,
		gopacket.LayerTypeMetadata{Name: "AETH", Decoder: extDecoder(wire.HdrAETH)})
	LayerTypeAtomicAckETH = gopacket.RegisterLayerType(layerNumAtomicAckETH,
		gopacket.LayerTypeMetadata{Name: "AtomicAckETH", Decoder: extDecoder(wire.HdrAtomicAckETH)})
	LayerTypeImmDt = gopacket.RegisterLayerType(layerNumImmDt,
		gopacket.LayerTypeMetadata{Name: "ImmDt", Decoder: extDecoder(wire.HdrImmDt)})
	LayerTypeIETH = gopacket.RegisterLayerType(layerNumIETH,
		gopacket.LayerTypeMetadata{Name: "IETH", Decoder: extDecoder(wire.HdrIETH)})
)

func init() {
	// UDP.NextLayerType looks the destination port up first (gopacket
	// layers/udp.go), so RoCEv2 is found by its well-known port.
	gplayers.RegisterUDPPortLayerType(wire.RoCEv2Port, LayerTypeBTH)
}

// layerTypeOf returns the layer type of the single extension header h.
func layerTypeOf(h wire.Headers) gopacket.LayerType {
	switch h {
	case wire.HdrRDETH:
		return LayerTypeRDETH
	case wire.HdrDETH:
		return LayerTypeDETH
	case wire.HdrFETH:
		return LayerTypeFETH
	case wire.HdrRETH:
		return LayerTypeRETH
	case wire.HdrAtomicETH:
		return LayerTypeAtomicETH
	case wire.HdrAETH:
		return LayerTypeAETH
	case wire.HdrAtomicAckETH:
		return LayerTypeAtomicAckETH
	case wire.HdrImmDt:
		return LayerTypeImmDt
	case wire.HdrIETH:
		return LayerTypeIETH
	}
	return gopacket.LayerTypeZero
}
