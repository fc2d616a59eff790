// Dovetail for one EKS cluster: the same resources as infra/sam/template.yaml (the SAM template
// explains each choice at length; the comments here say what differs or what CDK does for us).

import * as fs from 'node:fs';
import * as path from 'node:path';

import { Aws, CfnOutput, Duration, Fn, RemovalPolicy, Stack, StackProps, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as eks from 'aws-cdk-lib/aws-eks';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

import { DovetailSettings, functionAsset } from './settings';

/** Tag every instance and launch template carries; IAM conditions hang on it. */
export const CLUSTER_TAG = 'dovetail.dev/cluster';
/** The Kubernetes group infra/k8s/rbac/functions-clusterrole.yaml binds. */
export const FUNCTIONS_GROUP = 'dovetail:functions';
/** The provisioning lease's TTL (shared/core): no invocation may outlive it. */
export const LEASE_TTL = Duration.seconds(120);

/**
 * The interruption events, exactly the source / detail-type pairs
 * shared/core/src/interruption/parse.rs reads, with the detail filters that keep the function
 * from waking for events it would ignore.
 */
export const INTERRUPTION_EVENTS: { id: string; description: string; pattern: events.EventPattern }[] = [
  {
    id: 'SpotInterruptionRule',
    description: 'two-minute spot interruption warnings',
    pattern: { source: ['aws.ec2'], detailType: ['EC2 Spot Instance Interruption Warning'] },
  },
  {
    id: 'RebalanceRecommendationRule',
    description: 'spot rebalance recommendations',
    pattern: { source: ['aws.ec2'], detailType: ['EC2 Instance Rebalance Recommendation'] },
  },
  {
    id: 'InstanceStateChangeRule',
    description: 'instances stopping or terminating',
    // DISRUPTING_STATES in shared/core/src/interruption/mod.rs.
    pattern: {
      source: ['aws.ec2'],
      detailType: ['EC2 Instance State-change Notification'],
      detail: { state: ['stopping', 'stopped', 'shutting-down', 'terminated'] },
    },
  },
  {
    id: 'CapacityReservationInterruptionRule',
    description: 'interruptible capacity reservation reclaim warnings',
    pattern: { source: ['aws.ec2'], detailType: ['EC2 Capacity Reservation Instance Interruption Warning'] },
  },
  {
    id: 'CapacityBlockExpiryRule',
    description: 'Capacity Block expiration warnings',
    // Both spellings AWS documents (CAPACITY_BLOCK_EXPIRY in shared/core/src/interruption/parse.rs).
    pattern: {
      source: ['aws.ec2'],
      detailType: ['Capacity Block Expiration Warning', 'Capacity Block Reservation Expiration Warning'],
    },
  },
  {
    id: 'ScheduledChangeRule',
    description: 'AWS Health scheduled changes to EC2 instances',
    pattern: {
      source: ['aws.health'],
      detailType: ['AWS Health Event'],
      detail: { service: ['EC2'], eventTypeCategory: ['scheduledChange'] },
    },
  },
];

interface FunctionSpec {
  id: string;
  binary: string;
  description: string;
  /** MB. Memory buys CPU on Lambda: 1,769 MB is one full vCPU (see the SAM template). */
  memorySize: number;
  timeout: Duration;
}

export const FUNCTIONS = {
  provisioner: {
    id: 'Provisioner',
    binary: 'dovetail-provisioner',
    description: 'launches capacity for pending pods',
    memorySize: 1769,
    timeout: Duration.seconds(60),
  },
  interruption: {
    id: 'Interruption',
    binary: 'dovetail-interruption',
    description: 'drains and replaces interrupted nodes',
    memorySize: 1769,
    timeout: Duration.seconds(60),
  },
  sweeper: {
    id: 'Sweeper',
    binary: 'dovetail-sweeper',
    description: 'lifecycle, orphans, expiration, drift, consolidation',
    memorySize: 1769,
    timeout: Duration.seconds(90),
  },
} satisfies Record<string, FunctionSpec>;

export interface DovetailStackProps extends StackProps {
  readonly settings: DovetailSettings;
}

export class DovetailStack extends Stack {
  readonly doorbellQueue: sqs.Queue;
  readonly interruptionQueue: sqs.Queue;
  readonly table: dynamodb.Table;
  readonly functionsRole: iam.Role;

  constructor(scope: Construct, id: string, props: DovetailStackProps) {
    super(scope, id, props);
    const s = props.settings;
    const cluster = s.clusterName;
    for (const spec of Object.values(FUNCTIONS)) {
      if (spec.timeout.toSeconds() > LEASE_TTL.toSeconds() - 20) {
        throw new Error(`${spec.id}: timeout ${spec.timeout.toSeconds()} s must stay below the lease TTL`);
      }
    }

    // --- Queues: SSE-SQS (see the SAM template for why not a customer KMS key); enforceSSL adds
    // the deny-without-TLS queue policy. Visibility: 6 x the consumer's timeout (+ the batching
    // window for the doorbells).
    const deadLetterQueue = (name: string) =>
      new sqs.Queue(this, name, {
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        retentionPeriod: Duration.days(14),
      });
    const doorbellDlq = deadLetterQueue('DoorbellDeadLetterQueue');
    this.doorbellQueue = new sqs.Queue(this, 'DoorbellQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(FUNCTIONS.provisioner.timeout.toSeconds() * 6 + 1),
      retentionPeriod: Duration.hours(1),
      deadLetterQueue: { queue: doorbellDlq, maxReceiveCount: 5 },
    });
    const interruptionDlq = deadLetterQueue('InterruptionDeadLetterQueue');
    this.interruptionQueue = new sqs.Queue(this, 'InterruptionQueue', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(FUNCTIONS.interruption.timeout.toSeconds() * 6),
      // Also holds delayed drain resumptions: SQS's default 4 days.
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: interruptionDlq, maxReceiveCount: 5 },
    });

    // --- EventBridge rules; the SqsQueue target adds the queue policy statement allowing
    // events.amazonaws.com from this rule only (aws:SourceArn).
    for (const event of INTERRUPTION_EVENTS) {
      new events.Rule(this, event.id, {
        description: `Dovetail (${cluster}): ${event.description}`,
        eventPattern: event.pattern,
        targets: [new targets.SqsQueue(this.interruptionQueue)],
      });
    }

    // --- The table (shared/aws/README.md); retained with the stack's deletion, as the claims
    // describe running instances.
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'expires_at',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // The account's AWS managed key (aws/dynamodb): SSESpecification.SSEEnabled, as in the SAM
      // template, which says why not a customer managed key.
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.table.addGlobalSecondaryIndex({
      indexName: 'by-instance',
      partitionKey: { name: 'instance_id', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    // The live NodeClaims (sparse: Terminated ones lack `live`) and every claim write by time:
    // what a cold and a warm function read. Local, for strongly consistent reads; DynamoDB adds
    // local indexes only when it creates a table (docs/operations.md, "Upgrading").
    this.table.addLocalSecondaryIndex({
      indexName: 'live-claims',
      sortKey: { name: 'live', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    this.table.addLocalSecondaryIndex({
      indexName: 'claims-by-change',
      sortKey: { name: 'changed', type: dynamodb.AttributeType.NUMBER },
      projectionType: dynamodb.ProjectionType.ALL,
    });

    // --- Log groups, one per function.
    const logGroups = Object.fromEntries(
      Object.entries(FUNCTIONS).map(([name, spec]) => [
        name,
        new logs.LogGroup(this, `${spec.id}LogGroup`, {
          logGroupName: `/dovetail/${cluster}/${name}`,
          retention: s.logRetentionDays as logs.RetentionDays,
          removalPolicy: RemovalPolicy.DESTROY,
        }),
      ]),
    ) as Record<keyof typeof FUNCTIONS, logs.LogGroup>;

    // --- Nodes.
    const nodeRole: iam.IRole = s.nodeRoleName
      ? iam.Role.fromRoleName(this, 'NodeRole', s.nodeRoleName)
      : this.createNodeRole(cluster);
    if (!s.nodeRoleName || s.createNodeInstanceProfile) {
      // Same name as the role: what nodes of earlier releases run with. New launches use the
      // profile Dovetail makes for each EC2NodeClass `role`.
      new iam.CfnInstanceProfile(this, 'NodeInstanceProfile', {
        instanceProfileName: nodeRole.roleName,
        roles: [nodeRole.roleName],
      });
    }

    // --- The functions' role and its policy.
    this.functionsRole = new iam.Role(this, 'FunctionsRole', {
      description: `Dovetail functions for EKS cluster ${cluster}`,
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      inlinePolicies: {
        'dovetail-functions': this.functionsPolicy(cluster, nodeRole, Object.values(logGroups)),
      },
    });

    // --- The functions.
    const environment = {
      DOVETAIL_CLUSTER_NAME: cluster,
      DOVETAIL_TABLE_NAME: this.table.tableName,
      DOVETAIL_RESUME_QUEUE_URL: this.interruptionQueue.queueUrl,
      DOVETAIL_PRICING_REGION: s.pricingRegion,
      DOVETAIL_NODE_REPAIR: String(s.nodeRepair),
      DOVETAIL_MIN_VALUES_POLICY: s.minValuesPolicy,
      DOVETAIL_COST_LIMIT: s.costLimitPerHour,
      RUST_LOG: s.logFilter,
    };
    const fn = (name: keyof typeof FUNCTIONS) => {
      const spec = FUNCTIONS[name];
      return new lambda.Function(this, `${spec.id}Function`, {
        description: `Dovetail (${cluster}): ${spec.description}`,
        runtime: lambda.Runtime.PROVIDED_AL2023,
        architecture: lambda.Architecture.ARM_64,
        handler: 'bootstrap',
        code: lambda.Code.fromAsset(functionAsset(s.lambdaDir, spec.binary)),
        memorySize: spec.memorySize,
        timeout: spec.timeout,
        role: this.functionsRole,
        environment,
        loggingFormat: lambda.LoggingFormat.JSON,
        applicationLogLevelV2: s.applicationLogLevel as lambda.ApplicationLogLevel,
        logGroup: logGroups[name],
      });
    };
    const provisioner = fn('provisioner');
    const interruption = fn('interruption');
    const sweeper = fn('sweeper');

    // Event source mappings without SqsEventSource: it would grant the role ChangeMessageVisibility
    // and GetQueueUrl too; the policy above already has exactly what the mappings use.
    new lambda.EventSourceMapping(this, 'DoorbellsMapping', {
      target: provisioner,
      eventSourceArn: this.doorbellQueue.queueArn,
      batchSize: 100,
      maxBatchingWindow: Duration.seconds(1),
      reportBatchItemFailures: true,
      // One reconcile holds the lease; 2 is the floor of this setting.
      maxConcurrency: 2,
    });
    new lambda.EventSourceMapping(this, 'InterruptionsMapping', {
      target: interruption,
      eventSourceArn: this.interruptionQueue.queueArn,
      batchSize: 10,
      reportBatchItemFailures: true,
    });

    // A failed or late sweep is not retried: the next one starts within a minute.
    sweeper.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.seconds(60) });
    // The schedule's own role (rather than one the target makes) so its finding can be
    // acknowledged here: LambdaInvoke grants the function and its versions (`<arn>:*`).
    const scheduleRole = new iam.Role(this, 'SweepScheduleRole', {
      description: `Dovetail (${cluster}): EventBridge Scheduler invokes the sweeper`,
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
      }),
    });
    new scheduler.Schedule(this, 'SweepSchedule', {
      description: `Dovetail (${cluster}): sweep every minute`,
      schedule: scheduler.ScheduleExpression.rate(Duration.minutes(1)),
      target: new schedulerTargets.LambdaInvoke(sweeper, {
        role: scheduleRole,
        retryAttempts: 0,
        maxEventAge: Duration.seconds(60),
      }),
    });
    const sweeperId = this.resolve((sweeper.node.defaultChild as lambda.CfnFunction).logicalId);
    Validations.of(scheduleRole).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${sweeperId}.Arn>:*]`,
      reason:
        "lambda:InvokeFunction on the sweeper's versions and aliases, as CDK's LambdaInvoke target grants; " +
        'the role can invoke nothing else.',
    });

    // --- Cluster access (L1: the L2 AccessEntry needs an L2 cluster this stack does not own).
    new eks.CfnAccessEntry(this, 'FunctionsAccessEntry', {
      clusterName: cluster,
      principalArn: this.functionsRole.roleArn,
      type: 'STANDARD',
      kubernetesGroups: [FUNCTIONS_GROUP],
    });
    if (!s.nodeRoleName || s.createNodeAccessEntry) {
      new eks.CfnAccessEntry(this, 'NodeAccessEntry', {
        clusterName: cluster,
        principalArn: nodeRole.roleArn,
        type: 'EC2_LINUX',
      });
    }

    // --- The forwarder.
    const doorbellSender = new iam.ManagedPolicy(this, 'DoorbellSenderPolicy', {
      description: `Dovetail (${cluster}): send doorbells (SendMessage and SendMessageBatch)`,
      statements: [
        new iam.PolicyStatement({
          sid: 'RingDoorbells',
          actions: ['sqs:SendMessage'],
          resources: [this.doorbellQueue.queueArn],
        }),
      ],
    });
    if (s.forwarderIdentity === 'PodIdentity') {
      const forwarderRole = new iam.Role(this, 'ForwarderRole', {
        description: `Dovetail forwarder in EKS cluster ${cluster} (EKS Pod Identity)`,
        assumedBy: new iam.ServicePrincipal('pods.eks.amazonaws.com', {
          conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
        }).withSessionTags(),
        managedPolicies: [doorbellSender],
      });
      new eks.CfnPodIdentityAssociation(this, 'ForwarderPodIdentity', {
        clusterName: cluster,
        namespace: s.forwarderNamespace,
        serviceAccount: s.forwarderServiceAccount,
        roleArn: forwarderRole.roleArn,
      });
      new CfnOutput(this, 'ForwarderRoleArn', {
        description: "The forwarder's role, associated with its ServiceAccount by EKS Pod Identity",
        value: forwarderRole.roleArn,
      });
    }

    this.observe(s, { provisioner, interruption, sweeper }, [
      ['DoorbellQueueName', this.doorbellQueue],
      ['InterruptionQueueName', this.interruptionQueue],
      ['DoorbellDeadLetterQueueName', doorbellDlq],
      ['InterruptionDeadLetterQueueName', interruptionDlq],
    ]);

    // --- Outputs (the same names as the SAM template's).
    const output = (name: string, value: string, description?: string) =>
      new CfnOutput(this, name, { value, description });
    output(
      'DoorbellQueueUrl',
      this.doorbellQueue.queueUrl,
      'DOVETAIL_DOORBELL_QUEUE_URL for the forwarder (infra/k8s/forwarder/deployment.yaml)',
    );
    output('DoorbellQueueArn', this.doorbellQueue.queueArn, "The doorbell queue's ARN");
    output('InterruptionQueueUrl', this.interruptionQueue.queueUrl, 'Interruption events and delayed drain resumptions');
    output('DoorbellDeadLetterQueueUrl', doorbellDlq.queueUrl, 'Doorbells that failed 5 times');
    output('InterruptionDeadLetterQueueUrl', interruptionDlq.queueUrl, 'Interruption-queue messages that failed 5 times');
    output('TableName', this.table.tableName, 'DynamoDB table of NodeClaims, the lease and unavailable offerings');
    output('FunctionsRoleArn', this.functionsRole.roleArn, `The functions' role, mapped to ${FUNCTIONS_GROUP}`);
    output('NodeRoleName', nodeRole.roleName, 'The EC2NodeClass `role` for nodes Dovetail launches');
    output('DoorbellSenderPolicyArn', doorbellSender.managedPolicyArn, "Attach to the forwarder's IRSA role");
    output('ProvisionerFunctionName', provisioner.functionName);
    output('InterruptionFunctionName', interruption.functionName);
    output('SweeperFunctionName', sweeper.functionName);

    this.acknowledgeNagFindings(cluster);
  }

  /**
   * The dashboard (infra/dashboard/cloudwatch.json, which the SAM template embeds) and the alarms,
   * as the SAM template makes them (docs/operations.md, "Metrics, dashboards and alarms").
   */
  private observe(
    s: DovetailSettings,
    functions: Record<'provisioner' | 'interruption' | 'sweeper', lambda.Function>,
    queues: [string, sqs.Queue][],
  ): void {
    const cluster = s.clusterName;
    const body = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'dashboard', 'cloudwatch.json'), 'utf8');
    const variables: Record<string, string> = {
      ClusterName: cluster,
      ProvisionerFunction: functions.provisioner.functionName,
      InterruptionFunction: functions.interruption.functionName,
      SweeperFunction: functions.sweeper.functionName,
    };
    for (const [name, queue] of queues) variables[name] = queue.queueName;
    new cloudwatch.CfnDashboard(this, 'Dashboard', {
      dashboardName: `Dovetail-${cluster}`,
      dashboardBody: Fn.sub(body, variables),
    });
    const actions = s.alarmTopicArn ? [s.alarmTopicArn] : undefined;
    const alarm = (id: string, props: cloudwatch.CfnAlarmProps) =>
      new cloudwatch.CfnAlarm(this, id, {
        comparisonOperator: 'GreaterThanThreshold',
        treatMissingData: 'notBreaching',
        alarmActions: actions,
        okActions: actions,
        ...props,
      });
    const deadLetter = (id: string, queue: sqs.Queue, what: string) =>
      alarm(id, {
        alarmDescription: `Dovetail (${cluster}): ${what} dead-letter queue is not empty`,
        namespace: 'AWS/SQS',
        metricName: 'ApproximateNumberOfMessagesVisible',
        dimensions: [{ name: 'QueueName', value: queue.queueName }],
        statistic: 'Maximum',
        period: 300,
        evaluationPeriods: 1,
        threshold: 0,
      });
    const byName = Object.fromEntries(queues);
    deadLetter('DoorbellDeadLetterAlarm', byName.DoorbellDeadLetterQueueName, 'the doorbell');
    deadLetter('InterruptionDeadLetterAlarm', byName.InterruptionDeadLetterQueueName, 'the interruption');
    for (const [name, fn] of Object.entries(functions)) {
      const id = FUNCTIONS[name as keyof typeof FUNCTIONS].id;
      alarm(`${id}ErrorsAlarm`, {
        alarmDescription: `Dovetail (${cluster}): ${id}Function invocations failing`,
        namespace: 'AWS/Lambda',
        metricName: 'Errors',
        dimensions: [{ name: 'FunctionName', value: fn.functionName }],
        statistic: 'Sum',
        period: 300,
        evaluationPeriods: 3,
        datapointsToAlarm: 2,
        threshold: 0,
      });
    }
    const perCluster = (id: string, metricName: string): cloudwatch.CfnAlarm.MetricDataQueryProperty => ({
      id,
      returnData: false,
      metricStat: {
        metric: { namespace: 'Dovetail', metricName, dimensions: [{ name: 'Cluster', value: cluster }] },
        period: 300,
        stat: 'Sum',
      },
    });
    alarm('PodsPendingAlarm', {
      alarmDescription: `Dovetail (${cluster}): a pod pending longer than ${s.pendingPodsAlarmMinutes} minutes`,
      metrics: [
        {
          id: 'age',
          returnData: false,
          metricStat: {
            metric: { namespace: 'Dovetail', metricName: 'PodsUnboundTime', dimensions: [{ name: 'Cluster', value: cluster }] },
            period: 60,
            stat: 'Maximum',
          },
        },
        // In minutes, as the SAM template compares (a parameter there, which it cannot multiply).
        { id: 'minutes', label: 'oldest pending pod, minutes', expression: 'age / 60', returnData: true },
      ],
      evaluationPeriods: 1,
      threshold: s.pendingPodsAlarmMinutes,
    });
    alarm('LaunchFailureRateAlarm', {
      alarmDescription: `Dovetail (${cluster}): more than ${s.launchFailureAlarmPercent}% of launch attempts failing`,
      metrics: [
        perCluster('failures', 'CloudProviderErrors'),
        perCluster('created', 'NodeClaimsCreated'),
        {
          id: 'rate',
          label: 'launch failure percent',
          expression: '100 * FILL(failures, 0) / (FILL(failures, 0) + FILL(created, 0))',
          returnData: true,
        },
      ],
      evaluationPeriods: 3,
      threshold: s.launchFailureAlarmPercent,
    });
  }

  private createNodeRole(cluster: string): iam.Role {
    const role = new iam.Role(this, 'NodeRole', {
      roleName: `DovetailNodeRole-${cluster}`,
      description: `Nodes Dovetail launches for EKS cluster ${cluster}`,
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      managedPolicies: NODE_POLICIES.map((name) => iam.ManagedPolicy.fromAwsManagedPolicyName(name)),
    });
    for (const name of NODE_POLICIES) {
      Validations.of(role).acknowledge({
        id: `AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/${name}]`,
        reason:
          'The standard EKS node policies, as on every EKS managed node group: join the cluster, run the VPC CNI, ' +
          'pull images, Session Manager. AWS keeps them current with EKS; nodes are not Dovetail and need nothing less.',
      });
    }
    return role;
  }

  /** Every call shared/aws makes, in its narrowest form (statement by statement as in the SAM template). */
  private functionsPolicy(cluster: string, nodeRole: iam.IRole, logGroups: logs.LogGroup[]): iam.PolicyDocument {
    const ec2 = (type: string, account = true) =>
      `arn:${Aws.PARTITION}:ec2:${Aws.REGION}:${account ? Aws.ACCOUNT_ID : ''}:${type}/*`;
    const clusterTag = (prefix: 'aws:RequestTag' | 'aws:ResourceTag') => ({ [`${prefix}/${CLUSTER_TAG}`]: cluster });
    // The instance profiles made for EC2NodeClass roles, under this region's and cluster's path.
    const ownProfiles = `arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:instance-profile/dovetail/${Aws.REGION}/${cluster}/*`;
    return new iam.PolicyDocument({
      statements: [
        new iam.PolicyStatement({
          sid: 'DescribeEc2',
          actions: EC2_DESCRIBE,
          resources: ['*'],
          conditions: { StringEquals: { 'aws:RequestedRegion': Aws.REGION } },
        }),
        new iam.PolicyStatement({
          sid: 'CreateOnlyTaggedForCluster',
          actions: ['ec2:RunInstances', 'ec2:CreateFleet', 'ec2:CreateLaunchTemplate'],
          resources: [ec2('instance'), ec2('volume'), ec2('launch-template')],
          conditions: { StringEquals: clusterTag('aws:RequestTag') },
        }),
        new iam.PolicyStatement({
          sid: 'TagOnlyOnCreate',
          actions: ['ec2:CreateTags'],
          resources: [ec2('instance'), ec2('volume'), ec2('launch-template')],
          conditions: {
            StringEquals: {
              'ec2:CreateAction': ['RunInstances', 'CreateFleet', 'CreateLaunchTemplate'],
              ...clusterTag('aws:RequestTag'),
            },
          },
        }),
        new iam.PolicyStatement({
          sid: 'LaunchFromOwnTemplates',
          actions: ['ec2:RunInstances', 'ec2:CreateFleet'],
          resources: [ec2('launch-template')],
          conditions: { StringEquals: clusterTag('aws:ResourceTag') },
        }),
        new iam.PolicyStatement({
          sid: 'LaunchIngredients',
          actions: ['ec2:RunInstances', 'ec2:CreateFleet'],
          resources: [
            ec2('image', false),
            ec2('snapshot', false),
            ...LAUNCH_INGREDIENTS.map((type) => ec2(type)),
            CAPACITY_RESERVATIONS,
          ],
        }),
        new iam.PolicyStatement({
          sid: 'RemoveOnlyTaggedForCluster',
          actions: ['ec2:TerminateInstances', 'ec2:DeleteLaunchTemplate'],
          resources: [ec2('instance'), ec2('launch-template')],
          conditions: { StringEquals: clusterTag('aws:ResourceTag') },
        }),
        new iam.PolicyStatement({
          sid: 'PassNodeRole',
          actions: ['iam:PassRole'],
          resources: [nodeRole.roleArn],
          conditions: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
        }),
        new iam.PolicyStatement({
          sid: 'CreateInstanceProfilesTaggedForCluster',
          actions: ['iam:CreateInstanceProfile', 'iam:TagInstanceProfile'],
          resources: [ownProfiles],
          conditions: {
            StringEquals: {
              ...clusterTag('aws:RequestTag'),
              'aws:RequestTag/topology.kubernetes.io/region': Aws.REGION,
            },
            StringLike: { 'aws:RequestTag/dovetail.dev/ec2nodeclass': '*' },
          },
        }),
        new iam.PolicyStatement({
          sid: 'ChangeOnlyTaggedInstanceProfiles',
          actions: ['iam:AddRoleToInstanceProfile', 'iam:RemoveRoleFromInstanceProfile', 'iam:DeleteInstanceProfile'],
          resources: [ownProfiles],
          conditions: { StringEquals: clusterTag('aws:ResourceTag') },
        }),
        new iam.PolicyStatement({
          sid: 'ReadInstanceProfiles',
          actions: ['iam:GetInstanceProfile', 'iam:ListInstanceProfiles'],
          resources: [`arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:instance-profile/*`],
        }),
        new iam.PolicyStatement({
          sid: 'ReadEksAmiParameters',
          actions: ['ssm:GetParameter'],
          // Linux aliases under eks/optimized-ami, Windows ones (windows2022@latest) under
          // ami-windows-latest, Bottlerocket ones under bottlerocket.
          resources: [
            `arn:${Aws.PARTITION}:ssm:${Aws.REGION}::parameter/aws/service/eks/optimized-ami/*`,
            `arn:${Aws.PARTITION}:ssm:${Aws.REGION}::parameter/aws/service/ami-windows-latest/*`,
            `arn:${Aws.PARTITION}:ssm:${Aws.REGION}::parameter/aws/service/bottlerocket/*`,
          ],
        }),
        new iam.PolicyStatement({ sid: 'ReadPrices', actions: ['pricing:GetProducts'], resources: ['*'] }),
        new iam.PolicyStatement({
          sid: 'DescribeCluster',
          actions: ['eks:DescribeCluster'],
          resources: [`arn:${Aws.PARTITION}:eks:${Aws.REGION}:${Aws.ACCOUNT_ID}:cluster/${cluster}`],
        }),
        new iam.PolicyStatement({
          sid: 'Queues',
          actions: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:SendMessage'],
          resources: [this.doorbellQueue.queueArn, this.interruptionQueue.queueArn],
        }),
        new iam.PolicyStatement({
          sid: 'Table',
          actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:Query'],
          resources: [this.table.tableArn],
        }),
        new iam.PolicyStatement({
          sid: 'InstanceIndex',
          actions: ['dynamodb:Query'],
          resources: [`${this.table.tableArn}/index/by-instance`],
        }),
        new iam.PolicyStatement({
          sid: 'ClaimIndexes',
          actions: ['dynamodb:Query'],
          resources: [`${this.table.tableArn}/index/live-claims`, `${this.table.tableArn}/index/claims-by-change`],
        }),
        new iam.PolicyStatement({
          sid: 'Logs',
          actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
          resources: logGroups.map((g) => g.logGroupArn),
        }),
      ],
    });
  }

  /**
   * cdk-nag AwsSolutions findings this stack keeps on purpose, each with its reason. Every other
   * finding fails `cdk synth`.
   */
  private acknowledgeNagFindings(cluster: string): void {
    const ack = (scope: Construct, id: string, reason: string) => Validations.of(scope).acknowledge({ id, reason });
    const role = this.functionsRole;
    const ec2 = (type: string, account = true) =>
      `Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:${account ? '<AWS::AccountId>' : ''}:${type}/*`;
    ack(
      role,
      'AwsSolutions-IAM5[Resource::*]',
      'EC2 Describe* calls (DescribeEc2, limited to this region by aws:RequestedRegion) and pricing:GetProducts ' +
        '(ReadPrices) have no resource-level permissions: IAM accepts only "*" for them.',
    );
    for (const type of ['instance', 'volume']) {
      ack(
        role,
        `AwsSolutions-IAM5[${ec2(type)}]`,
        `New ${type}s have no ARN before they exist: creation is limited by the aws:RequestTag/${CLUSTER_TAG} ` +
          'condition (and tagging by ec2:CreateAction), termination by aws:ResourceTag on the same tag.',
      );
    }
    ack(
      role,
      `AwsSolutions-IAM5[${ec2('launch-template')}]`,
      'Launch templates are created per image and max-pods group, named at run time: creation needs ' +
        `aws:RequestTag/${CLUSTER_TAG}, launching from and deleting one needs aws:ResourceTag on the same tag.`,
    );
    ack(
      role,
      `AwsSolutions-IAM5[${ec2('image', false)}]`,
      'The AMI comes from the EC2NodeClass (an alias resolved through SSM, an id or a tag selector) and changes ' +
        'with every EKS AMI release; an image alone launches nothing without the tagged-instance statement.',
    );
    ack(
      role,
      `AwsSolutions-IAM5[${ec2('snapshot', false)}]`,
      "The AMI's root-volume snapshots, read by the launch; they follow the image (above).",
    );
    for (const type of LAUNCH_INGREDIENTS) {
      ack(
        role,
        `AwsSolutions-IAM5[${ec2(type)}]`,
        INGREDIENT_REASONS[type],
      );
    }
    ack(
      role,
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:*:capacity-reservation/*]',
      'The capacity reservation a reserved launch targets, chosen at run time by the EC2NodeClass ' +
        'capacityReservationSelectorTerms, in any account (reservations may be shared); it launches nothing alone.',
    );
    ack(
      role,
      `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/dovetail/<AWS::Region>/${cluster}/*]`,
      'One instance profile per EC2NodeClass with a role, named at run time: creation needs the cluster, region and ' +
        `class tags in the request, changing or deleting one needs aws:ResourceTag/${CLUSTER_TAG}.`,
    );
    ack(
      role,
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*]',
      'GetInstanceProfile runs before the profile exists, when IAM knows no path for it, and ListInstanceProfiles ' +
        'lists by path: reads of profile names and roles only.',
    );
    ack(
      role,
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/eks/optimized-ami/*]',
      'The public EKS-optimized AMI parameters, one per Kubernetes version, architecture and variant; read-only.',
    );
    ack(
      role,
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/ami-windows-latest/*]',
      'The public Windows AMI parameters (the EKS-optimized ones among them, one per Windows release and Kubernetes ' +
        'version); read-only.',
    );
    ack(
      role,
      'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/bottlerocket/*]',
      'The public Bottlerocket AMI parameters, one per Kubernetes version, variant, architecture and release; read-only.',
    );
  }
}

/** Describe calls shared/aws makes (catalog, offerings, prices, resolution, lookups). */
const EC2_DESCRIBE = [
  'ec2:DescribeAvailabilityZones',
  'ec2:DescribeCapacityReservations',
  'ec2:DescribeImages',
  'ec2:DescribeInstanceTypeOfferings',
  'ec2:DescribeInstanceTypes',
  'ec2:DescribeInstances',
  'ec2:DescribeLaunchTemplates',
  'ec2:DescribeSecurityGroups',
  'ec2:DescribeSpotPriceHistory',
  'ec2:DescribeSubnets',
];

/** What a launch uses or creates without tags of its own (account-scoped ARNs). */
const LAUNCH_INGREDIENTS = ['subnet', 'security-group', 'network-interface', 'fleet', 'spot-instances-request'] as const;

/** The capacity reservations a reserved launch may target: any account's, as they may be shared. */
const CAPACITY_RESERVATIONS = `arn:${Aws.PARTITION}:ec2:${Aws.REGION}:*:capacity-reservation/*`;

const INGREDIENT_REASONS: Record<(typeof LAUNCH_INGREDIENTS)[number], string> = {
  subnet: 'Subnets are chosen at run time by the EC2NodeClass subnetSelectorTerms.',
  'security-group': 'Security groups are chosen at run time by the EC2NodeClass securityGroupSelectorTerms.',
  'network-interface': "The instance's primary network interface, created by the launch itself without tags.",
  fleet: 'The CreateFleet instant request itself, which Dovetail does not tag; it launches nothing alone.',
  'spot-instances-request': "A spot launch's request, created by the fleet without tags; it launches nothing alone.",
};

/** The node role's AWS managed policies (what EKS managed node groups attach). */
const NODE_POLICIES = [
  'AmazonEKSWorkerNodePolicy',
  'AmazonEKS_CNI_Policy',
  'AmazonEC2ContainerRegistryPullOnly',
  'AmazonSSMManagedInstanceCore',
];
