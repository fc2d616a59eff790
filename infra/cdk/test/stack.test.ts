// Assertions on the synthesized template (`npm test`, run by `cargo test -p dovetail-tests --test
// integration infra::`). The functions' bootstrap files come from the same place `cdk synth`
// takes them (DOVETAIL_LAMBDA_DIR, else $CARGO_TARGET_DIR/lambda, else ../../target/lambda): a
// real `cargo lambda build --release --arm64`.

import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { App, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';

import { DovetailStack, FUNCTIONS, INTERRUPTION_EVENTS, LEASE_TTL } from '../lib/dovetail-stack';
import { BINARIES, DovetailSettings, functionAsset, lambdaDir, readSettings, SettingsError } from '../lib/settings';

const CDK_DIR = path.resolve(__dirname, '..', '..');
const LAMBDA_DIR = lambdaDir(undefined, process.env, CDK_DIR);

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

function settings(overrides: Partial<DovetailSettings> = {}): DovetailSettings {
  return {
    clusterName: 'prod',
    createNodeInstanceProfile: true,
    createNodeAccessEntry: true,
    forwarderIdentity: 'PodIdentity',
    forwarderNamespace: 'dovetail',
    forwarderServiceAccount: 'dovetail-forwarder',
    applicationLogLevel: 'INFO',
    logFilter: '',
    logRetentionDays: 30,
    pricingRegion: 'us-east-1',
    nodeRepair: false,
    minValuesPolicy: 'Strict',
    costLimitPerHour: '',
    pendingPodsAlarmMinutes: 10,
    launchFailureAlarmPercent: 50,
    lambdaDir: LAMBDA_DIR,
    ...overrides,
  };
}

/** The stack's template, synthesized with cdk-nag's AWS Solutions checks (a finding throws). */
function synth(overrides: Partial<DovetailSettings> = {}): Template {
  const app = new App({ outdir: fs.mkdtempSync(path.join(os.tmpdir(), 'dovetail-cdk-test-')) });
  const stack = new DovetailStack(app, 'Dovetail', { settings: settings(overrides) });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  try {
    app.synth();
    return Template.fromStack(stack);
  } finally {
    fs.rmSync(app.outdir, { recursive: true, force: true });
  }
}

const byType = (t: Template, type: string): [string, Json][] => Object.entries(t.findResources(type));
const ref = (id: string) => ({ Ref: id });
const arnOf = (id: string) => ({ 'Fn::GetAtt': [id, 'Arn'] });
/** The one resource of `type` whose logical ID starts with `prefix`. */
function one(t: Template, type: string, prefix: string): [string, Json] {
  const found = byType(t, type).filter(([id]) => id.startsWith(prefix));
  assert.equal(found.length, 1, `one ${type} ${prefix}*, found ${found.map(([id]) => id).join(', ') || 'none'}`);
  return found[0];
}
/** The functions role's inline policy statements, by Sid. */
function statements(t: Template): Record<string, Json> {
  const [, role] = one(t, 'AWS::IAM::Role', 'FunctionsRole');
  const docs = role.Properties.Policies as Json[];
  assert.equal(docs.length, 1);
  const bySid: Record<string, Json> = {};
  for (const s of docs[0].PolicyDocument.Statement) {
    assert.ok(s.Sid, `a statement without a Sid: ${JSON.stringify(s)}`);
    bySid[s.Sid] = s;
  }
  return bySid;
}
const list = <T>(x: T | T[]): T[] => (Array.isArray(x) ? x : [x]);
/** A resource ARN the stack builds with Fn::Join, as text with pseudo parameters named. */
function arnText(resource: Json): string {
  if (typeof resource === 'string') return resource;
  if (resource['Fn::Join']) {
    return resource['Fn::Join'][1].map((p: Json) => (typeof p === 'string' ? p : `<${p.Ref ?? JSON.stringify(p)}>`)).join('');
  }
  return JSON.stringify(resource);
}

describe('the functions', () => {
  const t = synth();

  it('are three arm64 provided.al2023 functions with the documented environment', () => {
    const functions = byType(t, 'AWS::Lambda::Function');
    assert.equal(functions.length, 3);
    for (const spec of Object.values(FUNCTIONS)) {
      const [, fn] = one(t, 'AWS::Lambda::Function', `${spec.id}Function`);
      const p = fn.Properties;
      assert.equal(p.Runtime, 'provided.al2023');
      assert.deepEqual(p.Architectures, ['arm64']);
      assert.equal(p.Handler, 'bootstrap');
      assert.equal(p.MemorySize, spec.memorySize);
      assert.equal(p.Timeout, spec.timeout.toSeconds());
      // An invocation must end well before the provisioning lease it may hold expires.
      assert.ok(p.Timeout <= 100 && p.Timeout < LEASE_TTL.toSeconds(), `${spec.id} timeout ${p.Timeout}`);
      assert.equal(p.LoggingConfig.LogFormat, 'JSON');
      assert.equal(p.LoggingConfig.ApplicationLogLevel, 'INFO');
      assert.deepEqual(Object.keys(p.Environment.Variables).sort(), [
        'DOVETAIL_CLUSTER_NAME',
        'DOVETAIL_COST_LIMIT',
        'DOVETAIL_MIN_VALUES_POLICY',
        'DOVETAIL_NODE_REPAIR',
        'DOVETAIL_PRICING_REGION',
        'DOVETAIL_RESUME_QUEUE_URL',
        'DOVETAIL_TABLE_NAME',
        'RUST_LOG',
      ]);
      const env = p.Environment.Variables;
      assert.equal(env.DOVETAIL_CLUSTER_NAME, 'prod');
      assert.deepEqual(env.DOVETAIL_RESUME_QUEUE_URL, ref(one(t, 'AWS::SQS::Queue', 'InterruptionQueue')[0]));
      assert.deepEqual(env.DOVETAIL_TABLE_NAME, ref(one(t, 'AWS::DynamoDB::Table', 'Table')[0]));
      assert.deepEqual(p.Role, arnOf(one(t, 'AWS::IAM::Role', 'FunctionsRole')[0]));
    }
  });

  it('each log to their own retained log group', () => {
    for (const name of Object.keys(FUNCTIONS)) {
      t.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: `/dovetail/prod/${name}`, RetentionInDays: 30 });
    }
  });
});

describe('queues', () => {
  const t = synth();
  const queues = Object.fromEntries(
    ['DoorbellQueue', 'DoorbellDeadLetterQueue', 'InterruptionQueue', 'InterruptionDeadLetterQueue'].map((name) => [
      name,
      one(t, 'AWS::SQS::Queue', name),
    ]),
  );

  it('are four, every one encrypted and refusing plain HTTP', () => {
    assert.equal(byType(t, 'AWS::SQS::Queue').length, 4);
    const policies = byType(t, 'AWS::SQS::QueuePolicy');
    for (const [id, queue] of Object.values(queues)) {
      assert.equal(queue.Properties.SqsManagedSseEnabled, true, `${id} SSE`);
      const denies = policies.filter(([, p]) =>
        p.Properties.PolicyDocument.Statement.some(
          (s: Json) =>
            s.Effect === 'Deny' &&
            s.Condition?.Bool?.['aws:SecureTransport'] === 'false' &&
            JSON.stringify(s.Resource) === JSON.stringify(arnOf(id)),
        ),
      );
      assert.equal(denies.length, 1, `${id}: one deny-without-TLS statement`);
    }
  });

  it('dead-letter after 5 receives, and stay invisible 6 x their consumer timeout', () => {
    const mappings = byType(t, 'AWS::Lambda::EventSourceMapping');
    assert.equal(mappings.length, 2);
    for (const [queueName, dlqName] of [
      ['DoorbellQueue', 'DoorbellDeadLetterQueue'],
      ['InterruptionQueue', 'InterruptionDeadLetterQueue'],
    ]) {
      const [id, queue] = queues[queueName];
      assert.deepEqual(queue.Properties.RedrivePolicy, { deadLetterTargetArn: arnOf(queues[dlqName][0]), maxReceiveCount: 5 });
      assert.equal(queues[dlqName][1].Properties.MessageRetentionPeriod, 14 * 24 * 3600);
      const [, mapping] = mappings.find(([, m]) => JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify(arnOf(id)))!;
      const fnId = mapping.Properties.FunctionName.Ref;
      const timeout = t.toJSON().Resources[fnId].Properties.Timeout;
      const window = mapping.Properties.MaximumBatchingWindowInSeconds ?? 0;
      assert.ok(
        queue.Properties.VisibilityTimeout >= 6 * timeout + window,
        `${queueName}: visibility ${queue.Properties.VisibilityTimeout} < 6 x ${timeout} + ${window}`,
      );
    }
  });

  it('feed the provisioner in batches of 100 within 1 s, at most 2 at a time', () => {
    const [provisioner] = one(t, 'AWS::Lambda::Function', 'ProvisionerFunction');
    t.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: ref(provisioner),
      EventSourceArn: arnOf(queues.DoorbellQueue[0]),
      BatchSize: 100,
      MaximumBatchingWindowInSeconds: 1,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: 2 },
    });
    const [interruption] = one(t, 'AWS::Lambda::Function', 'InterruptionFunction');
    t.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: ref(interruption),
      EventSourceArn: arnOf(queues.InterruptionQueue[0]),
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });
});

describe('events', () => {
  const t = synth();
  const [queueId] = one(t, 'AWS::SQS::Queue', 'InterruptionQueue');

  it('route the six interruption events, and only them, to the interruption queue', () => {
    const rules = byType(t, 'AWS::Events::Rule');
    assert.equal(rules.length, 6);
    const patterns = rules.map(([, r]) => {
      assert.deepEqual(r.Properties.Targets.map((x: Json) => x.Arn), [arnOf(queueId)]);
      assert.equal(r.Properties.State, 'ENABLED');
      return r.Properties.EventPattern;
    });
    const detailTypes = patterns
      .flatMap((p) => p['detail-type'].map((d: string) => `${p.source[0]} / ${d}`))
      .sort();
    // The pairs shared/core/src/interruption/parse.rs reads.
    assert.deepEqual(detailTypes, [
      'aws.ec2 / Capacity Block Expiration Warning',
      'aws.ec2 / Capacity Block Reservation Expiration Warning',
      'aws.ec2 / EC2 Capacity Reservation Instance Interruption Warning',
      'aws.ec2 / EC2 Instance Rebalance Recommendation',
      'aws.ec2 / EC2 Instance State-change Notification',
      'aws.ec2 / EC2 Spot Instance Interruption Warning',
      'aws.health / AWS Health Event',
    ]);
    const stateChange = patterns.find((p) => p['detail-type'][0] === 'EC2 Instance State-change Notification');
    assert.deepEqual(stateChange.detail, { state: ['stopping', 'stopped', 'shutting-down', 'terminated'] });
    const health = patterns.find((p) => p.source[0] === 'aws.health');
    assert.deepEqual(health.detail, { service: ['EC2'], eventTypeCategory: ['scheduledChange'] });
    assert.equal(INTERRUPTION_EVENTS.length, 6);
  });

  it('may be sent to the interruption queue by these rules alone', () => {
    const [, policy] = byType(t, 'AWS::SQS::QueuePolicy').find(([, p]) =>
      p.Properties.Queues.some((q: Json) => q.Ref === queueId),
    )!;
    const allows = policy.Properties.PolicyDocument.Statement.filter((s: Json) => s.Effect === 'Allow');
    const ruleIds = byType(t, 'AWS::Events::Rule').map(([id]) => id).sort();
    assert.deepEqual(allows.map((s: Json) => s.Condition.ArnEquals['aws:SourceArn']['Fn::GetAtt'][0]).sort(), ruleIds);
    for (const s of allows) assert.deepEqual(s.Principal, { Service: 'events.amazonaws.com' });
  });

  it('run the sweeper every minute, without retries', () => {
    const [sweeper] = one(t, 'AWS::Lambda::Function', 'SweeperFunction');
    const [, schedule] = one(t, 'AWS::Scheduler::Schedule', 'SweepSchedule');
    assert.equal(schedule.Properties.ScheduleExpression, 'rate(1 minute)');
    assert.equal(schedule.Properties.State, 'ENABLED');
    assert.deepEqual(schedule.Properties.Target.Arn, arnOf(sweeper));
    assert.equal(schedule.Properties.Target.RetryPolicy.MaximumRetryAttempts, 0);
    t.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: ref(sweeper),
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 60,
    });
  });
});

describe('the table', () => {
  it('has the documented keys, indexes, TTL, recovery and encryption, and survives the stack', () => {
    const t = synth();
    const [, table] = one(t, 'AWS::DynamoDB::Table', 'Table');
    assert.equal(table.DeletionPolicy, 'Retain');
    const p = table.Properties;
    assert.deepEqual(p.KeySchema, [
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    assert.equal(p.BillingMode, 'PAY_PER_REQUEST');
    assert.deepEqual(p.TimeToLiveSpecification, { AttributeName: 'expires_at', Enabled: true });
    assert.deepEqual(p.PointInTimeRecoverySpecification, { PointInTimeRecoveryEnabled: true });
    // The AWS managed key (aws/dynamodb), not the AWS owned one and not a customer managed key.
    assert.deepEqual(p.SSESpecification, { SSEEnabled: true });
    assert.deepEqual(p.GlobalSecondaryIndexes, [
      {
        IndexName: 'by-instance',
        KeySchema: [{ AttributeName: 'instance_id', KeyType: 'HASH' }],
        Projection: { ProjectionType: 'ALL' },
      },
    ]);
    assert.deepEqual(p.LocalSecondaryIndexes, [
      {
        IndexName: 'live-claims',
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'live', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
      {
        IndexName: 'claims-by-change',
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'changed', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ]);
  });
});

describe("the functions' IAM", () => {
  const t = synth();
  const s = statements(t);
  const requestTag = { StringEquals: { 'aws:RequestTag/dovetail.dev/cluster': 'prod' } };
  const resourceTag = { StringEquals: { 'aws:ResourceTag/dovetail.dev/cluster': 'prod' } };

  it('creates instances, volumes and launch templates only tagged for this cluster', () => {
    const create = s.CreateOnlyTaggedForCluster;
    assert.deepEqual(create.Action, ['ec2:RunInstances', 'ec2:CreateFleet', 'ec2:CreateLaunchTemplate']);
    assert.deepEqual(create.Resource.map(arnText), [
      'arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*',
      'arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:volume/*',
      'arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:launch-template/*',
    ]);
    assert.deepEqual(create.Condition, requestTag);
    assert.deepEqual(s.TagOnlyOnCreate.Action, 'ec2:CreateTags');
    assert.deepEqual(s.TagOnlyOnCreate.Condition, {
      StringEquals: {
        'ec2:CreateAction': ['RunInstances', 'CreateFleet', 'CreateLaunchTemplate'],
        'aws:RequestTag/dovetail.dev/cluster': 'prod',
      },
    });
    assert.deepEqual(s.LaunchFromOwnTemplates.Condition, resourceTag);
  });

  it('terminates and deletes only what carries this cluster tag', () => {
    assert.deepEqual(s.RemoveOnlyTaggedForCluster.Action, ['ec2:TerminateInstances', 'ec2:DeleteLaunchTemplate']);
    assert.deepEqual(s.RemoveOnlyTaggedForCluster.Condition, resourceTag);
  });

  it('grants no EC2 write on instances, volumes or launch templates without a tag condition', () => {
    const guarded = /:(instance|volume|launch-template)\/\*$/;
    for (const st of Object.values(s)) {
      const writes = list<string>(st.Action).filter((a) => a.startsWith('ec2:') && !a.startsWith('ec2:Describe'));
      const targets = list<Json>(st.Resource).map(arnText).filter((r) => r === '*' || guarded.test(r));
      if (writes.length > 0 && targets.length > 0) {
        const keys = Object.keys(st.Condition?.StringEquals ?? {});
        assert.ok(
          keys.some((k) => k.endsWith('Tag/dovetail.dev/cluster')),
          `${st.Sid}: ${writes.join(', ')} on ${targets.join(', ')} without a dovetail.dev/cluster condition`,
        );
      }
    }
  });

  it('passes only the node role, only to EC2', () => {
    const [nodeRole] = one(t, 'AWS::IAM::Role', 'NodeRole');
    assert.deepEqual(s.PassNodeRole.Resource, arnOf(nodeRole));
    assert.deepEqual(s.PassNodeRole.Condition, { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } });
  });

  it("makes and changes only this cluster's instance profiles, tagged for it", () => {
    const own = 'arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/dovetail/<AWS::Region>/prod/*';
    assert.equal(arnText(s.CreateInstanceProfilesTaggedForCluster.Resource), own);
    assert.deepEqual(list<string>(s.CreateInstanceProfilesTaggedForCluster.Action).sort(), [
      'iam:CreateInstanceProfile',
      'iam:TagInstanceProfile',
    ]);
    assert.deepEqual(s.CreateInstanceProfilesTaggedForCluster.Condition, {
      StringEquals: {
        'aws:RequestTag/dovetail.dev/cluster': 'prod',
        'aws:RequestTag/topology.kubernetes.io/region': { Ref: 'AWS::Region' },
      },
      StringLike: { 'aws:RequestTag/dovetail.dev/ec2nodeclass': '*' },
    });
    assert.equal(arnText(s.ChangeOnlyTaggedInstanceProfiles.Resource), own);
    assert.deepEqual(s.ChangeOnlyTaggedInstanceProfiles.Condition, {
      StringEquals: { 'aws:ResourceTag/dovetail.dev/cluster': 'prod' },
    });
    assert.equal(arnText(s.ReadInstanceProfiles.Resource), 'arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*');
    assert.deepEqual(list<string>(s.ReadInstanceProfiles.Action).sort(), ['iam:GetInstanceProfile', 'iam:ListInstanceProfiles']);
  });

  it('reads the EKS AMI parameters, prices and this cluster only', () => {
    assert.deepEqual(list<Json>(s.ReadEksAmiParameters.Resource).map(arnText), [
      'arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/eks/optimized-ami/*',
      'arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/ami-windows-latest/*',
      'arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/bottlerocket/*',
    ]);
    assert.equal(s.ReadEksAmiParameters.Action, 'ssm:GetParameter');
    assert.equal(s.ReadPrices.Action, 'pricing:GetProducts');
    assert.equal(arnText(s.DescribeCluster.Resource), 'arn:<AWS::Partition>:eks:<AWS::Region>:<AWS::AccountId>:cluster/prod');
    assert.deepEqual(s.DescribeEc2.Condition, { StringEquals: { 'aws:RequestedRegion': { Ref: 'AWS::Region' } } });
    assert.ok(list<string>(s.DescribeEc2.Action).every((a) => a.startsWith('ec2:Describe')));
  });

  it('scopes queues, table and logs to this stack', () => {
    const queueIds = ['DoorbellQueue', 'InterruptionQueue'].map((q) => arnOf(one(t, 'AWS::SQS::Queue', q)[0]));
    assert.deepEqual(s.Queues.Resource, queueIds);
    const [table] = one(t, 'AWS::DynamoDB::Table', 'Table');
    assert.deepEqual(s.Table.Resource, arnOf(table));
    assert.deepEqual(s.InstanceIndex.Resource, { 'Fn::Join': ['', [arnOf(table), '/index/by-instance']] });
    assert.deepEqual(s.ClaimIndexes.Resource, [
      { 'Fn::Join': ['', [arnOf(table), '/index/live-claims']] },
      { 'Fn::Join': ['', [arnOf(table), '/index/claims-by-change']] },
    ]);
    assert.equal(s.Logs.Resource.length, 3);
    for (const st of Object.values(s)) {
      const resources = list<Json>(st.Resource);
      if (resources.includes('*')) assert.ok(['DescribeEc2', 'ReadPrices'].includes(st.Sid), `${st.Sid} on "*"`);
    }
  });
});

describe('cluster access', () => {
  it("maps the functions' role to dovetail:functions and lets the node role join", () => {
    const t = synth();
    const [functionsRole] = one(t, 'AWS::IAM::Role', 'FunctionsRole');
    const [nodeRole] = one(t, 'AWS::IAM::Role', 'NodeRole');
    t.resourceCountIs('AWS::EKS::AccessEntry', 2);
    t.hasResourceProperties('AWS::EKS::AccessEntry', {
      ClusterName: 'prod',
      PrincipalArn: arnOf(functionsRole),
      Type: 'STANDARD',
      KubernetesGroups: ['dovetail:functions'],
    });
    t.hasResourceProperties('AWS::EKS::AccessEntry', { ClusterName: 'prod', PrincipalArn: arnOf(nodeRole), Type: 'EC2_LINUX' });
    t.hasResourceProperties('AWS::IAM::Role', { RoleName: 'DovetailNodeRole-prod' });
    t.hasResourceProperties('AWS::IAM::InstanceProfile', { InstanceProfileName: ref(nodeRole), Roles: [ref(nodeRole)] });
  });

  it('associates the forwarder role with its ServiceAccount (EKS Pod Identity)', () => {
    const t = synth();
    const [forwarderRole, role] = one(t, 'AWS::IAM::Role', 'ForwarderRole');
    t.hasResourceProperties('AWS::EKS::PodIdentityAssociation', {
      ClusterName: 'prod',
      Namespace: 'dovetail',
      ServiceAccount: 'dovetail-forwarder',
      RoleArn: arnOf(forwarderRole),
    });
    const trust = role.Properties.AssumeRolePolicyDocument.Statement;
    assert.deepEqual(trust.map((x: Json) => x.Principal), [{ Service: 'pods.eks.amazonaws.com' }]);
    assert.deepEqual(trust[0].Action, ['sts:AssumeRole', 'sts:TagSession']);
    const [policyId, policy] = one(t, 'AWS::IAM::ManagedPolicy', 'DoorbellSenderPolicy');
    assert.deepEqual(role.Properties.ManagedPolicyArns, [ref(policyId)]);
    const [doorbells] = one(t, 'AWS::SQS::Queue', 'DoorbellQueue');
    assert.deepEqual(policy.Properties.PolicyDocument.Statement, [
      { Sid: 'RingDoorbells', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: arnOf(doorbells) },
    ]);
  });

  it('with IRSA, makes only the policy for the forwarder', () => {
    const t = synth({ forwarderIdentity: 'IRSA' });
    t.resourceCountIs('AWS::EKS::PodIdentityAssociation', 0);
    assert.equal(byType(t, 'AWS::IAM::Role').filter(([id]) => id.startsWith('ForwarderRole')).length, 0);
    t.resourceCountIs('AWS::IAM::ManagedPolicy', 1);
  });

  it('uses an existing node role, with or without its profile and access entry', () => {
    const mine = synth({ nodeRoleName: 'MyNodes' });
    assert.equal(byType(mine, 'AWS::IAM::Role').filter(([id]) => id.startsWith('NodeRole')).length, 0);
    mine.hasResourceProperties('AWS::IAM::InstanceProfile', { InstanceProfileName: 'MyNodes', Roles: ['MyNodes'] });
    mine.resourceCountIs('AWS::EKS::AccessEntry', 2);
    const pass = statements(mine).PassNodeRole.Resource;
    assert.equal(arnText(pass), 'arn:<AWS::Partition>:iam::<AWS::AccountId>:role/MyNodes');

    const bare = synth({ nodeRoleName: 'MyNodes', createNodeInstanceProfile: false, createNodeAccessEntry: false });
    bare.resourceCountIs('AWS::IAM::InstanceProfile', 0);
    bare.resourceCountIs('AWS::EKS::AccessEntry', 1);
  });
});

describe('settings', () => {
  const context = (values: Record<string, unknown>) => (key: string) => values[key];

  it('need a valid cluster name', () => {
    assert.throws(() => readSettings(context({}), {}, CDK_DIR), /context clusterName is required/);
    assert.throws(() => readSettings(context({ clusterName: '-x' }), {}, CDK_DIR), /context clusterName="-x": must match/);
    assert.throws(
      () => readSettings(context({ clusterName: 'c'.repeat(60) }), {}, CDK_DIR),
      /longer than IAM's 64 characters; pass -c nodeRoleName/,
    );
  });

  it('name the bad key and the allowed values', () => {
    const base = { clusterName: 'prod' };
    assert.throws(
      () => readSettings(context({ ...base, forwarderIdentity: 'Kiam' }), {}, CDK_DIR),
      (e: Error) => e instanceof SettingsError && /forwarderIdentity="Kiam": must be one of PodIdentity, IRSA/.test(e.message),
    );
    assert.throws(() => readSettings(context({ ...base, logRetentionDays: '31' }), {}, CDK_DIR), /logRetentionDays="31"/);
    assert.throws(
      () => readSettings(context({ ...base, applicationLogLevel: 'VERBOSE' }), {}, CDK_DIR),
      /applicationLogLevel="VERBOSE": must be one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL/,
    );
    assert.throws(() => readSettings(context({ ...base, createNodeAccessEntry: 'yes' }), {}, CDK_DIR), /expected true or false/);
    const ok = readSettings(context({ ...base, logRetentionDays: '90', createNodeAccessEntry: 'false' }), {}, CDK_DIR);
    assert.equal(ok.logRetentionDays, 90);
    assert.equal(ok.createNodeAccessEntry, false);
    assert.equal(ok.nodeRoleName, undefined);
    for (const bad of ['-5', '$250', 'lots']) {
      assert.throws(
        () => readSettings(context({ ...base, costLimitPerHour: bad }), {}, CDK_DIR),
        new RegExp(`costLimitPerHour=${JSON.stringify(bad).replace(/[$]/g, '\\$')}: must be a non-negative number of USD per hour`),
      );
    }
    assert.throws(() => readSettings(context({ ...base, minValuesPolicy: 'Loose' }), {}, CDK_DIR), /must be one of Strict, BestEffort/);
    const decisions = readSettings(context({ ...base, nodeRepair: 'true', minValuesPolicy: 'BestEffort', costLimitPerHour: 250 }), {}, CDK_DIR);
    assert.deepEqual(
      [decisions.nodeRepair, decisions.minValuesPolicy, decisions.costLimitPerHour, ok.nodeRepair, ok.minValuesPolicy, ok.costLimitPerHour],
      [true, 'BestEffort', '250', false, 'Strict', ''],
    );
  });

  it('find the functions where cargo lambda puts them', () => {
    assert.equal(lambdaDir(undefined, {}, CDK_DIR), path.resolve(CDK_DIR, '../../target/lambda'));
    assert.equal(lambdaDir(undefined, { CARGO_TARGET_DIR: '/t' }, CDK_DIR), '/t/lambda');
    assert.equal(lambdaDir(undefined, { CARGO_TARGET_DIR: '/t', DOVETAIL_LAMBDA_DIR: '/l' }, CDK_DIR), '/l');
    assert.equal(lambdaDir('/c', { DOVETAIL_LAMBDA_DIR: '/l' }, CDK_DIR), '/c');
    for (const binary of BINARIES) assert.ok(functionAsset(LAMBDA_DIR, binary).endsWith(binary));
  });

  it('refuse a missing, non-ELF or x86-64 bootstrap, saying how to build it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dovetail-cdk-assets-'));
    try {
      const build = /cargo lambda build --release --arm64/;
      assert.throws(() => functionAsset(dir, 'dovetail-sweeper'), (e: Error) => /bootstrap does not exist/.test(e.message) && build.test(e.message));
      fs.mkdirSync(path.join(dir, 'dovetail-sweeper'));
      fs.writeFileSync(path.join(dir, 'dovetail-sweeper', 'bootstrap'), '#!/bin/sh\n');
      assert.throws(() => functionAsset(dir, 'dovetail-sweeper'), /is not an ELF executable/);
      // The header of this machine's node binary: a real executable, x86-64 on CI machines.
      fs.mkdirSync(path.join(dir, 'dovetail-provisioner'));
      const header = Buffer.alloc(64);
      const fd = fs.openSync(process.execPath, 'r');
      fs.readSync(fd, header, 0, 64, 0);
      fs.closeSync(fd);
      fs.writeFileSync(path.join(dir, 'dovetail-provisioner', 'bootstrap'), header);
      if (os.arch() === 'arm64') {
        assert.ok(functionAsset(dir, 'dovetail-provisioner'));
      } else {
        assert.throws(() => functionAsset(dir, 'dovetail-provisioner'), /is built for x86-64, but the functions run on arm64/);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('alarms', () => {
  const topic = 'arn:aws:sns:us-east-1:123456789012:oncall';

  it('notify the topic given, and exist without actions when none is', () => {
    const alarms = (t: Template) => byType(t, 'AWS::CloudWatch::Alarm');
    const quiet = alarms(synth());
    assert.deepEqual(quiet.map(([id]) => id).sort(), [
      'DoorbellDeadLetterAlarm',
      'InterruptionDeadLetterAlarm',
      'InterruptionErrorsAlarm',
      'LaunchFailureRateAlarm',
      'PodsPendingAlarm',
      'ProvisionerErrorsAlarm',
      'SweeperErrorsAlarm',
    ]);
    for (const [id, a] of quiet) assert.equal(a.Properties.AlarmActions, undefined, id);
    for (const [id, a] of alarms(synth({ alarmTopicArn: topic }))) {
      assert.deepEqual(a.Properties.AlarmActions, [topic], id);
      assert.deepEqual(a.Properties.OKActions, [topic], id);
    }
  });

  it('take their thresholds from the settings', () => {
    const t = synth({ pendingPodsAlarmMinutes: 15, launchFailureAlarmPercent: 30 });
    const pending = one(t, 'AWS::CloudWatch::Alarm', 'PodsPendingAlarm')[1].Properties;
    assert.equal(pending.Metrics[0].MetricStat.Metric.MetricName, 'PodsUnboundTime');
    assert.equal(pending.Threshold, 15);
    assert.equal(one(t, 'AWS::CloudWatch::Alarm', 'LaunchFailureRateAlarm')[1].Properties.Threshold, 30);
    const get = (values: Record<string, unknown>) => (key: string) => values[key];
    assert.throws(
      () => readSettings(get({ clusterName: 'prod', pendingPodsAlarmMinutes: '1' }), {}, CDK_DIR),
      /pendingPodsAlarmMinutes="1": must be a whole number from 2 to 1440/,
    );
    assert.throws(
      () => readSettings(get({ clusterName: 'prod', alarmTopicArn: 'oncall' }), {}, CDK_DIR),
      /alarmTopicArn="oncall": must match/,
    );
  });
});
