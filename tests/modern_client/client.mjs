// One case of tests/integration/test_modern_client.py, run with @platformatic/kafka (pinned in
// package-lock.json, installed by scripts/setup.sh): a modern client that speaks only recent
// protocol versions (docs/PROTOCOL.md lists which).
//
//   node client.mjs <case> <bootstrap host:port,...> '<json args>'
//
// Prints one JSON line on stdout: {"ok": true, "result": {...}} or {"ok": false, "error": "...",
// "name": "...", "api": [...]} (the error, its class and, for ResponseErrors, the failing API), and
// exits 0 either way; the Python test asserts. Every call has the client's own timeouts; the test
// also kills the process if it hangs.
import {
  Admin, Consumer, Producer, Connection, stringSerializers, stringDeserializers,
  describeClusterV1, apiVersionsV4,
  ConfigResourceTypes, ResourceTypes, ResourcePatternTypes, AclOperations, AclPermissionTypes,
  ClientQuotaMatchTypes, IncrementalAlterConfigOperationTypes
} from '@platformatic/kafka'

const [, , kase, bootstrap, rawArgs] = process.argv
const args = JSON.parse(rawArgs || '{}')
const brokers = bootstrap.split(',')
const common = { clientId: 'gregor-modern-client', bootstrapBrokers: brokers, timeout: 15000, retries: 3 }

function plain (v) {
  return JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x instanceof Map ? Object.fromEntries(x) : x)))
}

async function withAdmin (fn) {
  const admin = new Admin(common)
  try { return await fn(admin) } finally { await admin.close() }
}

const cases = {
  // CreateTopics v7 (topic ids) and Metadata
  async create_topic () {
    return withAdmin(async admin => {
      const created = await admin.createTopics({ topics: [args.topic], partitions: 3, replicas: 2 })
      const md = await admin.metadata({ topics: [args.topic] })
      return { created: plain(created), partitions: md.topics.get(args.topic).partitionsCount }
    })
  },

  // DeleteTopics v6
  async delete_topic () {
    return withAdmin(async admin => {
      await admin.deleteTopics({ topics: [args.topic] })
      const left = await admin.listTopics()
      return { listed: left.includes(args.topic) }
    })
  },

  // AlterConfigs v2, IncrementalAlterConfigs v1, DescribeConfigs v4
  async configs () {
    return withAdmin(async admin => {
      const res = { resourceType: ConfigResourceTypes.TOPIC, resourceName: args.topic }
      await admin.alterConfigs({ resources: [{ ...res, configs: [{ name: 'retention.ms', value: '3600000' }] }] })
      const afterAlter = await admin.describeConfigs({ resources: [{ ...res, configurationKeys: ['retention.ms'] }] })
      await admin.incrementalAlterConfigs({
        resources: [{ ...res, configs: [{ name: 'cleanup.policy', configOperation: IncrementalAlterConfigOperationTypes.SET, value: 'compact' }] }]
      })
      const afterIncr = await admin.describeConfigs({ resources: [{ ...res, configurationKeys: ['cleanup.policy', 'retention.ms'] }] })
      let unknown = null
      try {
        await admin.describeConfigs({ resources: [{ resourceType: ConfigResourceTypes.TOPIC, resourceName: 'no-such-topic' }] })
      } catch (e) { unknown = e.message }
      return { afterAlter: plain(afterAlter), afterIncr: plain(afterIncr), unknown }
    })
  },

  // AlterClientQuotas v1, DescribeClientQuotas v0
  async quotas () {
    return withAdmin(async admin => {
      const entities = [{ entityType: 'user', entityName: args.user }]
      await admin.alterClientQuotas({ entries: [{ entities, ops: [{ key: 'consumer_byte_rate', value: 2048, remove: false }] }] })
      // the broker answers from its dynamic-config cache, which follows ZooKeeper: poll
      let described = []
      for (let i = 0; i < 100 && !described.length; i++) {
        described = await admin.describeClientQuotas({ components: [{ entityType: 'user', matchType: ClientQuotaMatchTypes.EXACT, match: args.user }] })
        if (!described.length) await new Promise(resolve => setTimeout(resolve, 100))
      }
      await admin.alterClientQuotas({ entries: [{ entities, ops: [{ key: 'consumer_byte_rate', remove: true }] }] })
      return { described: plain(described) }
    })
  },

  // CreateAcls / DescribeAcls / DeleteAcls v3, with the User resource type of v3
  async acls () {
    return withAdmin(async admin => {
      const topicAcl = {
        resourceType: ResourceTypes.TOPIC, resourceName: args.topic, resourcePatternType: ResourcePatternTypes.LITERAL,
        principal: 'User:alice', host: '*', operation: AclOperations.READ, permissionType: AclPermissionTypes.ALLOW
      }
      const userAcl = {
        resourceType: ResourceTypes.USER, resourceName: 'User:bob', resourcePatternType: ResourcePatternTypes.LITERAL,
        principal: 'User:alice', host: '*', operation: AclOperations.CREATE_TOKENS, permissionType: AclPermissionTypes.ALLOW
      }
      await admin.createAcls({ creations: [topicAcl, userAcl] })
      const any = {
        resourceType: ResourceTypes.ANY, resourceName: null, resourcePatternType: ResourcePatternTypes.ANY,
        principal: 'User:alice', host: null, operation: AclOperations.ANY, permissionType: AclPermissionTypes.ANY
      }
      const described = await admin.describeAcls({ filter: any })
      const deleted = await admin.deleteAcls({ filters: [any] })
      const after = await admin.describeAcls({ filter: any })
      return { described: plain(described), deleted: plain(deleted), after: plain(after) }
    })
  },

  // DescribeCluster v1 and ApiVersions v4 (the client's Admin has no describeCluster: raw API)
  async describe_cluster () {
    const [host, port] = brokers[0].split(':')
    const conn = new Connection('gregor-modern-client')
    await new Promise((resolve, reject) => conn.connect(host, Number(port), e => (e ? reject(e) : resolve())))
    try {
      const cluster = await describeClusterV1.api.async(conn, true, 1)
      const versions = await apiVersionsV4.api.async(conn, 'gregor-modern-client', '1.35.0')
      return { cluster: plain(cluster), apiKeys: plain(versions.apiKeys) }
    } finally {
      await new Promise(resolve => conn.close(() => resolve()))
    }
  },

  // Produce (idempotent: InitProducerId), then Metadata
  async produce () {
    const producer = new Producer({ ...common, serializers: stringSerializers, idempotent: true, acks: -1 })
    try {
      const messages = []
      for (let i = 0; i < args.count; i++) messages.push({ topic: args.topic, key: `k${i}`, value: `v${i}`, partition: i % 3 })
      const res = await producer.send({ messages })
      return { offsets: plain(res.offsets) }
    } finally {
      await producer.close()
    }
  },

  // a consumer group: FindCoordinator v4, JoinGroup/SyncGroup, Fetch v12+, OffsetCommit, OffsetFetch v8
  async consume_group () {
    const consumer = new Consumer({
      ...common, groupId: args.group, deserializers: stringDeserializers, sessionTimeout: 10000, heartbeatInterval: 500
    })
    try {
      const stream = await consumer.consume({ topics: [args.topic], mode: 'earliest', autocommit: false, maxWaitTime: 500 })
      const seen = []
      for await (const message of stream) {
        seen.push(message.value)
        await message.commit()
        if (seen.length >= args.count) break
      }
      await stream.close()
      const committed = await consumer.listCommittedOffsets({ topics: [{ topic: args.topic, partitions: [0, 1, 2] }] })
      return { values: seen.sort(), committed: plain(committed) }
    } finally {
      await consumer.close(true)
    }
  },

  // a transaction: FindCoordinator v4, InitProducerId, AddPartitionsToTxn v3+, EndTxn v3+
  async transaction () {
    const producer = new Producer({
      ...common, serializers: stringSerializers, idempotent: true, acks: -1, transactionalId: args.txn
    })
    try {
      const txn = await producer.beginTransaction()
      await txn.send({ messages: [{ topic: args.topic, key: 't', value: 'committed', partition: 0 }] })
      await txn.commit()
      const aborted = await producer.beginTransaction()
      await aborted.send({ messages: [{ topic: args.topic, key: 't', value: 'aborted', partition: 0 }] })
      await aborted.abort()
      return { done: true }
    } finally {
      await producer.close()
    }
  }
}

try {
  if (!cases[kase]) throw new Error(`unknown case ${kase}`)
  const result = await cases[kase]()
  process.stdout.write(JSON.stringify({ ok: true, result }) + '\n')
} catch (e) {
  const errors = e.errors ? e.errors.map(x => `${x.name}: ${x.message}`) : []
  process.stdout.write(JSON.stringify({ ok: false, name: e.name, error: e.message, errors, api: e.apiId ?? null }) + '\n')
}
process.exit(0)
