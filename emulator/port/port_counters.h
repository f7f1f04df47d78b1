/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Every counter of the port, in one list: X(ENUM, name) gives
 * `PC_<ENUM>` in enum port_counter and the printed name (what
 * `rocemu stat`, ROCEMU_STATS=1 and the docs call it). Names are stable:
 * tests and users grep for them. No counter is created at run time.
 *
 * PORT_COUNTERS are always listed; PORT_EVENTS and PORT_DROPS are listed
 * once non-zero (ROCEMU_STATS=all lists them all). Every frame the port
 * drops is counted under one PORT_DROPS reason (and in rx_drops or
 * tx_drops). The transport's counters are ROCEMU_COUNTERS in
 * transport/rocemu_transport.h.
 */
#ifndef ROCEMU_PORT_COUNTERS_H
#define ROCEMU_PORT_COUNTERS_H

/* Always listed, the hot ones first. */
#define PORT_COUNTERS(X)                                                                           \
	X(RX_FRAMES, rx_frames)                                                                    \
	X(RX_BYTES, rx_bytes)                                                                      \
	X(TX_FRAMES, tx_frames)                                                                    \
	X(TX_BYTES, tx_bytes)                                                                      \
	X(RX_ROCE, rx_roce_frames)                                                                 \
	X(LOOPBACK_FRAMES, loopback_frames)                                                        \
	X(RX_DROPS, rx_drops)                                                                      \
	X(TX_DROPS, tx_drops)                                                                      \
	X(ARP_RX, arp_rx)                                                                          \
	X(ARP_REQUESTS_TX, arp_requests_tx)                                                        \
	X(ARP_REPLIES_TX, arp_replies_tx)                                                          \
	X(ARP_RESOLVED, neigh_resolved)                                                            \
	X(ARP_FAILED, neigh_failed)                                                                \
	X(GARP_TX, gratuitous_arp_tx)                                                              \
	X(ND_RX, nd_rx)                                                                            \
	X(ND_SOLICITS_TX, nd_solicits_tx)                                                          \
	X(ND_ADVERTS_TX, nd_adverts_tx)                                                            \
	X(IGMP_TX, igmp_tx)                                                                        \
	X(MLD_TX, mld_tx)                                                                          \
	X(RX_MCAST, rx_mcast_frames)                                                               \
	X(ICMP_ECHO_RX, icmp_echo_requests_rx)                                                     \
	X(ICMP_ECHO_REPLIES_TX, icmp_echo_replies_tx)                                              \
	X(PING_TX, ping_requests_tx)                                                               \
	X(PING_REPLIES, ping_replies_rx)                                                           \
	X(CAPTURE_FRAMES, capture_frames)                                                          \
	X(CAPTURE_FILTERED, capture_filtered_out)                                                  \
	X(CAPTURE_FILES, capture_files)                                                            \
	X(CAPTURE_NOT_WRITTEN, capture_frames_not_written)                                         \
	X(LINK_CHANGES, link_changes)

/* What happened that is no drop. */
#define PORT_EVENTS(X)                                                                             \
	X(LEFT_TO_KERNEL, left_to_kernel) /* an ARP/ND/ICMP frame the kernel answers */            \
	X(NEIGH_LEARN_SKIPPED, neigh_learn_skipped)                                                \
	X(NEIGH_KERNEL_ASKED, neigh_kernel_asked) /* the kernel asked to resolve (af_xdp) */       \
	X(ND_NA_UNSOLICITED, nd_na_unsolicited)	  /* no entry: silently discarded (RFC 4861) */    \
	X(MCAST_QUERIES_RX, mcast_queries_rx)	  /* IGMP/MLD queries answered */                  \
	X(PEER_CLOSED, peer_closed)		  /* memif: the peer closed the connection */      \
	X(PEER_VANISHED, peer_vanished)		  /* ... went with no close (seen while parked) */ \
	X(MEMIF_RECONNECTS, memif_reconnects)                                                      \
	X(MEMIF_ILLEGAL_TRANSITIONS, memif_illegal_transitions)                                    \
	X(MEMIF_BELL_PAGE_REMAPPED, memif_bell_page_remapped)                                      \
	X(BELL_RUNG, bell_rung)                                                                    \
	X(PROGRESS_NAPS, progress_naps)		      /* the progress thread went to sleep */      \
	X(PROGRESS_WOKEN, progress_woken)	      /* ... and a bell or doorbell woke it */     \
	X(PROGRESS_AWAY_SPINS, progress_away_spins)   /* it spun for an application gone away */   \
	X(PROGRESS_AWAY_PLACED, progress_away_placed) /* ... and took frames in that spin */       \
	X(PROGRESS_AWAY_YIELDS,                                                                    \
	  progress_away_yields)	  /* ... after its app yielded the CPU to it */                    \
	X(TX_HELD, tx_held_posts) /* posts whose frames waited for a later flush (port_tx.c) */    \
	X(TX_ACKS_HELD, tx_acks_held) /* passes whose ACKs waited for the next post */             \
	X(APP_ANSWERS, app_answers)   /* posts that answered a peer's request (port_app.c) */      \
	X(PMD_COPY_TX_BYTES, pmd_copy_tx_bytes) /* memif: bytes its PMD copied into the ring */    \
	X(PMD_COPY_RX_BYTES, pmd_copy_rx_bytes) /* memif: bytes its PMD copied out of the ring */  \
	X(DIRECT_TX_BYTES, direct_tx_bytes) /* memif direct channel: frame bytes handed over */    \
	X(DIRECT_RX_BYTES, direct_rx_bytes) /* ... and taken without a copy */                     \
	X(DIRECT_COPY_TX_BYTES, direct_copy_tx_bytes) /* ... copied: not built in its area */      \
	X(DIRECT_COPY_RX_BYTES, direct_copy_rx_bytes) /* ... copied: not RoCE, or small */         \
	X(DIRECT_SMALL_RX_BYTES,                                                                   \
	  direct_small_rx_bytes)		  /* ... of those, RoCE (small-frame mode) */      \
	X(DIRECT_MAPS, direct_maps)		  /* ... the peer's offers mapped */               \
	X(DIRECT_MAP_FAILED, direct_map_failed)	  /* ... an offer that could not be */             \
	X(DIRECT_RESETS, direct_resets)		  /* ... frames out taken back */                  \
	X(DIRECT_BAD_RETURNS, direct_bad_returns) /* ... an index the peer returned wrongly */     \
	X(DIRECT_TX_CAPPED, direct_tx_capped)	  /* ... bursts stopped: frames out at the cap */  \
	X(PMD_RX_BURSTS, pmd_rx_bursts)		  /* memif: calls of its PMD's rx burst */         \
	X(PMD_TX_BURSTS, pmd_tx_bursts)		  /* ... and tx burst */                           \
	X(PMD_PARKS, pmd_parks) /* ... its PMD left alone: the channel carries all */              \
	X(HOST_DIRECT_RINGS, host_direct_rings)                                                    \
	X(TX_DIRECT_FRAMES, tx_direct_frames)                                                      \
	X(POOL_THREAD_CACHES, pool_thread_caches) /* app threads given an lcore's mbuf cache */    \
	X(POOL_THREAD_NO_LCORE, pool_thread_no_lcore) /* ... left without one: no lcore id free */ \
	X(FAULT_TX_CORRUPTED, fault_tx_corrupted)                                                  \
	X(FAULT_RX_CORRUPTED, fault_rx_corrupted)                                                  \
	X(FAULT_TX_DELAYED, fault_tx_delayed)                                                      \
	X(FAULT_RX_DELAYED, fault_rx_delayed)                                                      \
	X(FAULT_TX_REORDERED, fault_tx_reordered)                                                  \
	X(FAULT_RX_REORDERED, fault_rx_reordered)                                                  \
	X(FAULT_TX_DUPLICATED, fault_tx_duplicated)                                                \
	X(FAULT_RX_DUPLICATED, fault_rx_duplicated)

/* Every reason the port drops a frame for. */
#define PORT_DROPS(X)                                                                              \
	/* received frames (port_rx.c): before the codec */                                        \
	X(DROP_RX_TOO_LONG, drop_rx_too_long) /* chained mbuf that cannot be linearized */         \
	X(DROP_RUNT, drop_runt)		      /* shorter than an Ethernet header */                \
	X(DROP_NOT_OUR_MAC, drop_not_our_mac)                                                      \
	X(DROP_VLAN_NOT_CONFIGURED, drop_vlan_not_configured) /* tagged, the port has no VLAN */   \
	X(DROP_VLAN_UNTAGGED, drop_vlan_untagged) /* untagged, the port is on a VLAN */            \
	X(DROP_VLAN_OTHER, drop_vlan_other)	  /* tagged with another VLAN */                   \
	X(DROP_UNSUPPORTED_ETHERTYPE, drop_unsupported_ethertype)                                  \
	X(DROP_IP_TRUNCATED, drop_ip_truncated)                                                    \
	X(DROP_NOT_OUR_ADDRESS, drop_not_our_address)                                              \
	X(DROP_UNSUPPORTED_PROTOCOL, drop_unsupported_protocol)                                    \
	X(DROP_ROCE_NOT_UNICAST, drop_roce_not_unicast)                                            \
	X(DROP_NO_UPPER, drop_no_upper) /* RoCE frame while no transport is attached */            \
	X(DROP_OWN_SOURCE_MAC, drop_own_source_mac)                                                \
	/* the codec's parse statuses (wire/roce_parse.c names them), not ok */                    \
	X(DROP_TRUNCATED, drop_truncated)                                                          \
	X(DROP_NOT_IP, drop_not_ip)                                                                \
	X(DROP_BAD_IP_VERSION, drop_bad_ip_version)                                                \
	X(DROP_BAD_IP_LENGTH, drop_bad_ip_length)                                                  \
	X(DROP_BAD_IP_CHECKSUM, drop_bad_ip_checksum) /* also ICMP's IPv4 header */                \
	X(DROP_IP_OPTIONS, drop_ip_options)                                                        \
	X(DROP_IP_FRAGMENT, drop_ip_fragment) /* also ICMP's IPv4 header */                        \
	X(DROP_NOT_UDP, drop_not_udp)                                                              \
	X(DROP_NOT_ROCE_PORT, drop_not_roce_port)                                                  \
	X(DROP_BAD_UDP_LENGTH, drop_bad_udp_length)                                                \
	X(DROP_BAD_TVER, drop_bad_tver)                                                            \
	X(DROP_UNKNOWN_OPCODE, drop_unknown_opcode)                                                \
	X(DROP_BAD_LENGTH, drop_bad_length)                                                        \
	X(DROP_BAD_ICRC, drop_bad_icrc)                                                            \
	/* the transport's (rocemu_port_count) */                                                  \
	X(DROP_BAD_PKEY, drop_bad_pkey)                                                            \
	/* ICMP (port_icmp.c) */                                                                   \
	X(DROP_IP_BAD_HEADER, drop_ip_bad_header)                                                  \
	X(DROP_ICMP_BAD_CHECKSUM, drop_icmp_bad_checksum)                                          \
	X(DROP_ICMP_REPLY_UNMATCHED, drop_icmp_reply_unmatched)                                    \
	X(DROP_ICMP_UNHANDLED, drop_icmp_unhandled)                                                \
	X(DROP_ICMP_BAD_SOURCE, drop_icmp_bad_source)                                              \
	X(DROP_ICMP_RATE_LIMITED, drop_icmp_rate_limited)                                          \
	X(DROP_NO_SOURCE_ADDRESS, drop_no_source_address)                                          \
	X(DROP_ICMP6_BAD_CHECKSUM, drop_icmp6_bad_checksum)                                        \
	X(DROP_ICMP6_UNHANDLED, drop_icmp6_unhandled)                                              \
	/* ARP and ND (port_neigh.c) */                                                            \
	X(DROP_ARP_TRUNCATED, drop_arp_truncated)                                                  \
	X(DROP_ARP_UNSUPPORTED, drop_arp_unsupported)                                              \
	X(DROP_ARP_OWN, drop_arp_own)                                                              \
	X(DROP_ARP_ADDRESS_CONFLICT, drop_arp_address_conflict)                                    \
	X(DROP_ARP_UNSUPPORTED_OP, drop_arp_unsupported_op)                                        \
	X(DROP_ARP_BAD_SENDER, drop_arp_bad_sender)                                                \
	X(DROP_ARP_NOT_FOR_US, drop_arp_not_for_us)                                                \
	X(DROP_ND_INVALID, drop_nd_invalid)                                                        \
	X(DROP_IGMP_INVALID, drop_igmp_invalid)                                                    \
	X(DROP_MLD_INVALID, drop_mld_invalid)                                                      \
	X(DROP_ND_NOT_FOR_US, drop_nd_not_for_us)                                                  \
	X(DROP_ND_ADDRESS_CONFLICT, drop_nd_address_conflict)                                      \
	X(DROP_NEIGH_BAD_MAC, drop_neigh_bad_mac)                                                  \
	X(DROP_NEIGH_LOCKED, drop_neigh_locked)                                                    \
	X(DROP_MBUF_EXHAUSTED, drop_mbuf_exhausted)                                                \
	/* frames to send (port_tx.c and the links) */                                             \
	X(DROP_TX_RUNT, drop_tx_runt)                                                              \
	X(DROP_TX_FULL, drop_tx_full)                                                              \
	X(DROP_TX_VLAN_NO_ROOM, drop_tx_vlan_no_room) /* no headroom for the 802.1Q tag */         \
	X(DROP_LOOPBACK_FULL, drop_loopback_full)                                                  \
	X(DROP_TX_UNSENT_AT_CLOSE, drop_tx_unsent_at_close)                                        \
	X(DROP_TX_RECONNECTING, drop_tx_reconnecting) /* memif: no connection yet */               \
	X(DROP_TX_CLOSING, drop_tx_closing)	      /* memif: ours is closing */                 \
	X(DROP_TX_PEER_CLOSED, drop_tx_peer_closed)   /* memif: the peer closed */                 \
	X(DROP_TX_HOST_GONE, drop_tx_host_gone)	      /* host link: rocemu host is gone */         \
	X(DROP_TX_TOO_LONG, drop_tx_too_long)	      /* host link: frame over a slot */           \
	X(DROP_QPN_FREE_UNSENT, drop_qpn_free_unsent)                                              \
	X(DROP_RX_BAD_RING, drop_rx_bad_ring)	      /* host link: ring indices out of range */   \
	X(DROP_RX_BAD_SLOT, drop_rx_bad_slot)	      /* host link: slot length out of range */    \
	X(DROP_DIRECT_BAD_DESC, drop_direct_bad_desc) /* memif direct: index or range */           \
	X(DROP_DIRECT_BUFFER_HELD, drop_direct_buffer_held) /* ... a buffer given twice */         \
	X(DROP_DIRECT_BAD_RING, drop_direct_bad_ring)	    /* ... ring index out of range */      \
	/* the fault injector (port_fault.c) */                                                    \
	X(DROP_FAULT_TX, drop_fault_tx_drop)                                                       \
	X(DROP_FAULT_RX, drop_fault_rx_drop)

/* The X-macros end each entry with a comma clang-format cannot see. */
// clang-format off
enum port_counter {
#define PORT_COUNTER_ENUM(e, n) PC_##e,
	PORT_COUNTERS(PORT_COUNTER_ENUM)
	/* counters from PC_LISTED_COUNT on are listed only once non-zero */
	PC_LISTED_COUNT,
	PC_LISTED_LAST_ = PC_LISTED_COUNT - 1,
	PORT_EVENTS(PORT_COUNTER_ENUM)
	PC_DROP_FIRST,
	PC_EVENT_LAST_ = PC_DROP_FIRST - 1,
	PORT_DROPS(PORT_COUNTER_ENUM)
#undef PORT_COUNTER_ENUM
	PC_COUNT
};
// clang-format on

#endif
