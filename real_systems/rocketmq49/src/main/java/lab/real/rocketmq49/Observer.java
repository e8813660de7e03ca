package lab.real.rocketmq49;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.common.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * What one member's client sends and receives, seen through RocketMQ's own `RPCHook` (the remoting client calls
 * it before every request it sends, sync, async or oneway, and before every request a broker pushes to it),
 * turned into the lab's trace events. Nothing is changed: the hook only reads.
 *
 * - NOTIFY_CONSUMER_IDS_CHANGED from a broker: `notified` (the lab's `rocketmq` design records the same);
 * - UPDATE_CONSUMER_OFFSET (oneway: `persistConsumerOffset` every `persistConsumerOffsetInterval`, a queue let
 *   go in a rebalance, the shutdown): `commit`, `accepted` when sent (a broker accepts any offset from anyone,
 *   and a oneway request has no answer), `why` `interval`, `removed` or `stop` by the thread that sent it;
 * - PULL_MESSAGE carrying the COMMIT_OFFSET flag: `commit` of the offset it carries, `why` `pull`, once per
 *   offset per queue (an idle queue's pulls carry the same one again and again), as the lab's design traces it;
 * - GET_CONSUMER_LIST_BY_GROUP: which broker the allocation that follows on the same thread read its id list
 *   from (the `broker` of its `assigned`).
 *
 * Only the lab's topic is traced (not the `%RETRY%` topic RocketMQ subscribes by itself).
 */
final class Observer implements RPCHook {
    private final ConsumerHost.Member member;
    private final Layout layout;
    private final ThreadLocal<String> idList = new ThreadLocal<>();
    private final Map<Integer, Long> pullCommits = new ConcurrentHashMap<>();
    private final Map<String, String> names = new ConcurrentHashMap<>();
    volatile boolean stopping;

    Observer(ConsumerHost.Member member, Layout layout) {
        this.member = member;
        this.layout = layout;
    }

    /** The broker (its address) the last GET_CONSUMER_LIST_BY_GROUP of this thread went to. */
    String idListBroker() {
        String addr = idList.get();
        if (addr == null) return "";
        String name = brokerName(addr);
        return name == null ? addr : name;
    }

    @Override
    public void doBeforeRequest(String addr, RemotingCommand request) {
        try {
            switch (request.getCode()) {
                case RequestCode.GET_CONSUMER_LIST_BY_GROUP -> idList.set(addr);
                case RequestCode.NOTIFY_CONSUMER_IDS_CHANGED -> {
                    String name = brokerName(addr);
                    member.event("notified", Map.of("broker", name == null ? addr : name));
                }
                case RequestCode.UPDATE_CONSUMER_OFFSET -> {
                    if (request.readCustomHeader() instanceof UpdateConsumerOffsetRequestHeader h
                            && h.getTopic().equals(layout.topic())) {
                        commit(addr, h.getQueueId(), h.getCommitOffset(), why());
                    }
                }
                case RequestCode.PULL_MESSAGE -> {
                    if (request.readCustomHeader() instanceof PullMessageRequestHeader h
                            && h.getTopic().equals(layout.topic()) && PullSysFlag.hasCommitOffsetFlag(h.getSysFlag())) {
                        commit(addr, h.getQueueId(), h.getCommitOffset(), "pull");
                    }
                }
                default -> { }
            }
        } catch (RuntimeException e) {
            member.event("rocketmq_request_failed", Map.of("api", "observer", "broker", addr, "error", e.toString()));
        }
    }

    private String why() {
        if (stopping) return "stop";
        return Thread.currentThread().getName().startsWith("RebalanceService") ? "removed" : "interval";
    }

    private void commit(String addr, int queueId, long offset, String why) {
        int partition = layout.partition(brokerName(addr), queueId);
        if (partition < 0) return;
        if (why.equals("pull")) {
            Long last = pullCommits.put(partition, offset);
            if (last != null && last == offset) return;
        }
        Map<String, Object> f = new HashMap<>();
        f.put("topic", layout.topic());
        f.put("partition", partition);
        f.put("offset", offset);
        f.put("outcome", "accepted");
        f.put("error", "NONE");
        f.put("why", why);
        member.event("commit", f);
    }

    /** The broker name of an address, from the member's own route table. */
    private String brokerName(String addr) {
        return names.computeIfAbsent(addr, a -> member.brokerNameOf(a));
    }

    @Override
    public void doAfterResponse(String addr, RemotingCommand request, RemotingCommand response) {}
}
