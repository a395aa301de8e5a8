// standin_test.go — a stand-in for flurryd for the examples (example_test.go): a UDP server
// on a free port of 127.0.0.1 that speaks just enough of PROTOCOL.md, unsigned, to make the
// examples' output the same on every run: its IDs are issued at one fixed instant,
// 2025-01-01T00:00:00.000Z, by node 7 of the snowflake layout, counting up from 0; the
// sequence "invoices" counts from 1; PING and INFO are answered.
package flurry_test

import (
	"encoding/binary"
	"net"
	"sync"

	flurry "flurry.dev/client"
)

type standIn struct {
	Addr string // "127.0.0.1:PORT"
	conn *net.UDPConn
	mu   sync.Mutex
	next uint64 // the next ID's counter
	seq  uint64 // the next number of "invoices"
}

// startFlurrydStandIn starts the stand-in; Close stops it.
func startFlurrydStandIn() *standIn {
	flurry.CountTestRun()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	s := &standIn{Addr: conn.LocalAddr().String(), conn: conn, seq: 1}
	go s.serve()
	return s
}

func (s *standIn) Close() { s.conn.Close() }

const (
	standInNode = 7
	standInTime = 1735689600000 - flurry.DefaultEpochMs // 2025-01-01T00:00:00Z, in 1 ms units
)

func (s *standIn) serve() {
	buffer := make([]byte, 2048)
	for {
		n, from, err := s.conn.ReadFromUDP(buffer)
		if err != nil {
			return // closed
		}
		if answer := s.answer(buffer[:n]); answer != nil {
			s.conn.WriteToUDP(answer, from) //nolint:errcheck
		}
	}
}

// answer is the answer to one request: OK for GET_IDS (one range), GET_SEQ of "invoices",
// PING and INFO; UNKNOWN_SEQUENCE for another sequence; nothing for anything else.
func (s *standIn) answer(request []byte) []byte {
	if len(request) < 20 || binary.BigEndian.Uint16(request) != flurry.Magic || request[3]&0x80 != 0 {
		return nil
	}
	opcode, count := flurry.Opcode(request[3]), binary.BigEndian.Uint32(request[8:])
	out := make([]byte, 20, 36)
	binary.BigEndian.PutUint16(out, flurry.Magic)
	out[2], out[3] = flurry.ProtocolVersion, request[3]|0x80
	binary.BigEndian.PutUint16(out[6:], standInNode)
	copy(out[8:16], request[12:20]) // the request id
	s.mu.Lock()
	defer s.mu.Unlock()
	switch opcode {
	case flurry.OpGetIDs:
		out[5] = 1
		first := flurry.SnowflakeLayout().Compose(standInTime, standInNode, 0, uint32(s.next))
		s.next += uint64(count)
		out = binary.BigEndian.AppendUint64(out, first)
		out = binary.BigEndian.AppendUint32(out, count)
	case flurry.OpGetSeq:
		if name := request[21 : 21+int(request[20])]; string(name) != "invoices" {
			out[4] = byte(flurry.StatusUnknownSeq)
			break
		}
		out[5] = 1
		out = binary.BigEndian.AppendUint64(out, s.seq)
		out = binary.BigEndian.AppendUint32(out, count)
		s.seq += uint64(count)
	case flurry.OpInfo:
		out = binary.BigEndian.AppendUint64(out, flurry.DefaultEpochMs)
		out = binary.BigEndian.AppendUint16(out, 1)
		out = append(out, 41, 10, 12, 0, 0, 1) // time, node, sequence bits; no core bits; 1 worker
	case flurry.OpPing:
	default:
		return nil
	}
	return out
}
