//! `pfx-player doctor`: why frames drop, from the NIC and a multicast sniff.
