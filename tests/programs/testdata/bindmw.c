/* bindmw: binds a type-1 memory window with ibv_bind_mw on an RC QP
 * connected to itself (GID index 1 of the device's one port), waits for
 * the signaled bind's completion, then RDMA-writes through the window's
 * new rkey and checks the bytes landed. Prints "ok <step>" or
 * "FAIL <step>: why" and exits 1 on the first failure; a completion that
 * does not come within 10 s is a failure (the bug this pins: a bind the
 * daemon never saw because the post went round the preload's notifying
 * post_send, tests/programs/bindmw_test.go).
 *
 * Build: gcc -O2 -Wall -Werror -o bindmw bindmw.c -libverbs
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define CHECK(step, cond, ...)                                      \
	do {                                                        \
		if (!(cond)) {                                      \
			printf("FAIL %s: ", step);                  \
			printf(__VA_ARGS__);                        \
			printf(" (errno %s)\n", strerror(errno));   \
			exit(1);                                    \
		}                                                   \
		printf("ok %s\n", step);                            \
		fflush(stdout);                                     \
	} while (0)

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 10)
			return 0;
	}
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK("device", list != NULL && list[0] != NULL, "no device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK("open", ctx != NULL, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK("pd", pd != NULL, "ibv_alloc_pd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK("cq", cq != NULL, "ibv_create_cq");
	enum { LEN = 4096 };
	char *buf = aligned_alloc(4096, 2 * LEN);
	memset(buf, 0, 2 * LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * LEN,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	CHECK("mr", mr != NULL, "ibv_reg_mr with MW_BIND");
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK("mw", mw != NULL, "ibv_alloc_mw type 1");

	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK("qp", qp != NULL, "ibv_create_qp");
	union ibv_gid gid;
	CHECK("gid", ibv_query_gid(ctx, 1, 1, &gid) == 0, "ibv_query_gid 1");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
	CHECK("init", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS) == 0, "to INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	CHECK("rtr", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0, "to RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK("rts", ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0, "to RTS");

	/* The window covers the MR's second half, remote write. */
	uint32_t old = mw->rkey;
	struct ibv_mw_bind b = {
		.wr_id = 0xb1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)buf + LEN, .length = LEN,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE },
	};
	CHECK("bind", ibv_bind_mw(qp, mw, &b) == 0, "ibv_bind_mw");
	CHECK("rkey", mw->rkey != old && mw->rkey >> 8 == old >> 8,
	      "rkey %#x after bind, was %#x: the key byte should change", mw->rkey, old);
	struct ibv_wc wc;
	int n = poll_one(cq, &wc);
	CHECK("bind-completion", n == 1, "no completion for the bind within 10 s (poll %d)", n);
	CHECK("bind-status", wc.status == IBV_WC_SUCCESS && wc.wr_id == 0xb1 && wc.opcode == IBV_WC_BIND_MW,
	      "status %s wr_id %#llx opcode %d", ibv_wc_status_str(wc.status),
	      (unsigned long long)wc.wr_id, wc.opcode);

	/* An RDMA write through the window lands in the MR's second half. */
	memset(buf, 0x5a, 64);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x77, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)buf + LEN, .rkey = mw->rkey } };
	struct ibv_send_wr *bad;
	CHECK("write", ibv_post_send(qp, &wr, &bad) == 0, "ibv_post_send");
	n = poll_one(cq, &wc);
	CHECK("write-completion", n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 0x77,
	      "poll %d status %s", n, n == 1 ? ibv_wc_status_str(wc.status) : "-");
	int same = 1;
	for (int i = 0; i < 64; i++)
		same &= buf[LEN + i] == 0x5a;
	CHECK("data", same && buf[LEN + 64] == 0, "the write did not land through the window");

	CHECK("dealloc-mw", ibv_dealloc_mw(mw) == 0, "ibv_dealloc_mw");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
